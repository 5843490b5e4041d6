/** Medians, ratios against the targets, and the Markdown report. */

export function median(xs) {
  if (!xs || xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const fmtMs = (ms) => (ms === null ? 'n/a' : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
const fmtN = (n) => n.toLocaleString('en-US');

export const ROWS = [
  ['stage', 'stagedroot stage (durable, default policy: hardlink usr/, reflink-or-copy the rest)'],
  ['stage step: plan', '↳ plan step: hooks, source checked and planned, free-space preflight'],
  ['stage step: copy', '↳ copy step: the booted tree copied, linked or snapshotted'],
  ['stage step: apply', '↳ apply step: the change set written'],
  ['stage step: manifest', '↳ manifest step: the new manifest and delta, the merge-conflict check'],
  ['stage step: validate', '↳ validate step'],
  ['stage step: sync', '↳ sync step: `sync -f` of the new tree'],
  ['stage step: commit', '↳ commit step: rename, manifest hash, state write'],
  ['stage (hardlink all)', 'stagedroot stage (durable, hardlink policy: every top-level directory hardlinked)'],
  ['finalize', 'stagedroot finalize'],
  ['rollback', 'stagedroot rollback'],
  ['status', 'stagedroot status (open + status)'],
  ['prune', 'stagedroot prune (removes one deployment)'],
  ['verify', 'stagedroot verify (whole tree, every file hashed)'],
  ['cp -al', '`cp -al` of the booted tree'],
  ['cp -al + sync -f', '`cp -al` + `sync -f`'],
  ['cp -a --reflink=auto', '`cp -a --reflink=auto` of the booted tree'],
  ['cp -a --reflink=auto + sync -f', '`cp -a --reflink=auto` + `sync -f`'],
  ['rsync -a --link-dest', '`rsync -a --link-dest=booted new/ dest/`'],
  ['rsync -a --link-dest + sync -f', '`rsync -a --link-dest` + `sync -f`'],
  ['ostree commit', '`ostree commit` of the new tree'],
  ['ostree admin deploy', '`ostree admin deploy` (commit already imported)'],
  ['ostree commit + deploy', '`ostree commit` + `ostree admin deploy`'],
  ['event-loop delay', 'max event-loop delay of the staging process during the stage (`monitorEventLoopDelay`)'],
  ['event-loop busy', 'longest stretch the event loop ran code during the stage (from `eventLoopUtilization`)'],
  ['event-loop cpu', 'most CPU time the staging process\'s main thread used between two 5 ms ticks (its `schedstat`)'],
];

/** BENCHMARKS.md's heading of filesystemTargets' table. */
export const FILESYSTEM_HEADING = '## Targets: stage on each filesystem (btrfs, the portable path on ext4, the event loop, memory)';

/**
 * The targets of a stage on each filesystem (stage against `cp -al` + `sync -f` on the
 * bench directory's and an ext4 loop mount, btrfs's snapshot and its scaling, the event
 * loop's delay during a stage, the staging process's memory), from the bench directory's
 * filesystem and the loop mounts: `byFs` is [{ type, results } | { type, why }], the
 * first one the bench directory's.
 */
export function filesystemTargets(byFs) {
  const out = [];
  const sized = (results) => {
    const big = results.reduce((a, b) => (b.files > a.files ? b : a));
    const small = results.reduce((a, b) => (b.files < a.files ? b : a));
    return { big, small };
  };
  const med = (r, k) => median(r.samples[k]);
  const main = byFs[0];
  const { big } = sized(main.results);
  out.push(ratio(`stage (default policy) ≤ 1.2 × cp -al + sync -f (${main.type}, ${fmtN(big.files)} files)`, med(big, 'stage'), med(big, 'cp -al + sync -f'), 1.2));
  out.push(ratio(`stage (hardlink policy) ≤ 1.2 × cp -al + sync -f (${main.type}, ${fmtN(big.files)} files)`, med(big, 'stage (hardlink all)'), med(big, 'cp -al + sync -f'), 1.2));
  // The same on an ext4 loop mount: the portable path away from the root filesystem's other writers.
  const ext4 = byFs.find((f, i) => i > 0 && f.type === 'ext4' && !f.why);
  if (ext4) {
    const { big: e } = sized(ext4.results);
    out.push(ratio(`stage (default policy) ≤ 1.2 × cp -al + sync -f (ext4 loop mount, ${fmtN(e.files)} files)`, med(e, 'stage'), med(e, 'cp -al + sync -f'), 1.2));
    out.push(ratio(`stage (hardlink policy) ≤ 1.2 × cp -al + sync -f (ext4 loop mount, ${fmtN(e.files)} files)`, med(e, 'stage (hardlink all)'), med(e, 'cp -al + sync -f'), 1.2));
  }
  const btrfs = byFs.find((f) => f.type === 'btrfs');
  if (!btrfs || btrfs.why) {
    out.push({ target: 'btrfs targets', measured: btrfs?.why ?? 'no btrfs run', ratio: 'n/a', pass: null });
  } else {
    const b = sized(btrfs.results);
    out.push(ratio(`btrfs: stage ≤ 0.1 × cp -al + sync -f (${fmtN(b.big.files)} files)`, med(b.big, 'stage'), med(b.big, 'cp -al + sync -f'), 0.1));
    if (b.big !== b.small) {
      const scale = `${fmtN(b.big.files)} vs ${fmtN(b.small.files)} files`;
      out.push(ratio(`btrfs: stage ≤ 1.5 × its time at ${fmtN(b.small.files)} (${scale})`, med(b.big, 'stage'), med(b.small, 'stage'), 1.5));
      out.push(ratio(`btrfs: prune of one deployment ≤ 1.5 × its time at ${fmtN(b.small.files)} (${scale})`, med(b.big, 'prune'), med(b.small, 'prune'), 1.5));
    }
  }
  for (const [i, f] of byFs.entries()) {
    if (f.why) continue;
    const where = i > 0 && f.type === main.type ? `${f.type} loop mount` : f.type;
    const { big: g } = sized(f.results);
    const d = med(g, 'event-loop delay');
    out.push({ target: `event-loop delay during a stage ≤ 50 ms (${where}, ${fmtN(g.files)} files)`, measured: `${fmtMs(d)} ms (longest busy stretch ${fmtMs(med(g, 'event-loop busy'))} ms; most main-thread CPU between two ticks ${fmtMs(med(g, 'event-loop cpu'))} ms)`, ratio: d === null ? 'n/a' : `${(d / 50).toFixed(2)} of the bound`, pass: d === null ? null : d <= 50 });
  }
  const rss = big.peakRssBytes / (1 << 20);
  out.push({ target: `peak RSS of staging ≤ 200 MB (${main.type}, ${fmtN(big.files)} files)`, measured: `${rss.toFixed(0)} MB`, ratio: `${(rss / 200).toFixed(2)} of the bound`, pass: rss <= 200 });
  return out;
}

/** BENCHMARKS.md's heading of referenceTargets' table. */
export const REFERENCE_HEADING = '## Targets: stage against cp -al and ostree, the tree\'s size, status';

/**
 * The targets against the reference tools and the tree's size (stage against `cp -al` and
 * ostree, finalize and rollback at both sizes, status, the staging process's memory),
 * each a ratio (or an absolute bound) from this one run.
 */
export function referenceTargets(results) {
  const by = new Map(results.map((r) => [r.files, r]));
  const big = results.reduce((a, b) => (b.files > a.files ? b : a));
  const small = results.reduce((a, b) => (b.files < a.files ? b : a));
  const med = (r, k) => median(r.samples[k]);
  const out = [];
  for (const r of results) {
    const n = fmtN(r.files);
    out.push(ratio(`stage (hardlink policy) ≤ 1.3 × cp -al (${n} files)`, med(r, 'stage (hardlink all)'), med(r, 'cp -al'), 1.3));
    out.push(ratio(`stage (default policy, etc/ copied) ≤ 1.3 × cp -al (${n} files)`, med(r, 'stage'), med(r, 'cp -al'), 1.3));
    out.push(ratio(`stage ≤ 1.0 × ostree admin deploy alone (${n} files)`, med(r, 'stage'), med(r, 'ostree admin deploy'), 1.0));
    out.push(ratio(`stage ≤ 0.5 × ostree commit + deploy (${n} files)`, med(r, 'stage'), med(r, 'ostree commit + deploy'), 0.5));
  }
  if (big !== small) {
    const scale = `${fmtN(big.files)} vs ${fmtN(small.files)} files`;
    out.push(ratio(`finalize ≤ 1.5 × its time at ${fmtN(small.files)} (${scale})`, med(big, 'finalize'), med(small, 'finalize'), 1.5));
    out.push(ratio(`rollback ≤ 1.5 × its time at ${fmtN(small.files)} (${scale})`, med(big, 'rollback'), med(small, 'rollback'), 1.5));
  }
  const s = med(big, 'status');
  out.push({ target: `status < 50 ms (${fmtN(big.files)} files)`, measured: `${fmtMs(s)} ms`, ratio: s === null ? 'n/a' : `${(s / 50).toFixed(2)} of the bound`, pass: s === null ? null : s < 50 });
  const rss = big.peakRssBytes / (1 << 20);
  out.push({ target: `peak RSS of staging ≤ 200 MB (${fmtN(big.files)} files)`, measured: `${rss.toFixed(0)} MB`, ratio: `${(rss / 200).toFixed(2)} of the bound`, pass: rss <= 200 });
  void by;
  return out;
}

function ratio(target, a, b, bound) {
  if (a === null || b === null) return { target, measured: `${fmtMs(a)} / ${fmtMs(b)} ms`, ratio: 'n/a (reference not run)', pass: null };
  const x = a / b;
  return { target, measured: `${fmtMs(a)} / ${fmtMs(b)} ms`, ratio: `${x.toFixed(2)}×`, pass: x <= bound };
}

export function resultsTable(results) {
  const head = `| operation | ${results.map((r) => `${fmtN(r.files)} files: median ms (min–max)`).join(' | ')} |`;
  const sep = `|---|${results.map(() => '---:').join('|')}|`;
  const lines = [head, sep];
  for (const [k, label] of ROWS) {
    if (!results.some((r) => r.samples[k])) continue;
    lines.push(`| ${label} | ${results.map((r) => cell(r.samples[k])).join(' | ')} |`);
  }
  lines.push(`| peak RSS of the staging process | ${results.map((r) => `${(r.peakRssBytes / (1 << 20)).toFixed(0)} MB`).join(' | ')} |`);
  return lines.join('\n');
}

function cell(xs) {
  if (!xs) return 'not run';
  return `${fmtMs(median(xs))} (${fmtMs(Math.min(...xs))}–${fmtMs(Math.max(...xs))})`;
}

export function targetsTable(rows) {
  const lines = ['| target | measured (stagedroot / reference) | ratio | met |', '|---|---|---:|:---:|'];
  for (const t of rows) lines.push(`| ${t.target} | ${t.measured} | ${t.ratio} | ${t.pass === null ? 'not measured' : t.pass ? 'yes' : '**no**'} |`);
  return lines.join('\n');
}
