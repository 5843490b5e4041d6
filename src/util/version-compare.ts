/**
 * Orders version strings as people read them: runs of digits by their value (6.10 after
 * 6.9), everything else by code unit. What `a.localeCompare(b, 'en', { numeric: true })`
 * gives for kernel versions, without Intl: its first collator costs ICU's start, ~65 ms of
 * an apply-live's commit under TCG (profiled), for a sort of two or three names.
 */
export function compareVersions(a: string, b: string): number {
  const x = a.match(/\d+|\D+/g) ?? [];
  const y = b.match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const p = x[i]!;
    const q = y[i]!;
    if (p === q) continue;
    const digits = /^\d/.test(p) && /^\d/.test(q);
    if (digits) {
      const m = p.replace(/^0+(?=\d)/, '');
      const n = q.replace(/^0+(?=\d)/, '');
      if (m.length !== n.length) return m.length - n.length;
      if (m !== n) return m < n ? -1 : 1;
      continue; // equal values written with other leading zeros: the next run decides
    }
    return p < q ? -1 : 1;
  }
  return x.length - y.length || (a < b ? -1 : a > b ? 1 : 0);
}
