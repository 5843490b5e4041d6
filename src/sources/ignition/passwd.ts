/**
 * Name lookups in a tree's own etc/passwd and etc/group (never the host's NSS: the
 * staged root may have different users than the machine that stages it).
 */
export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export interface GroupEntry {
  name: string;
  gid: number;
}

/** Parses passwd(5) lines; comments, NIS (+/-) lines and malformed lines are skipped. */
export function parsePasswd(text: string): Map<string, PasswdEntry> {
  const out = new Map<string, PasswdEntry>();
  for (const f of records(text, 7)) {
    const uid = toId(f[2]);
    const gid = toId(f[3]);
    if (uid === null || gid === null || out.has(f[0]!)) continue; // the first entry wins, as in getpwnam
    out.set(f[0]!, { name: f[0]!, uid, gid, home: f[5]! });
  }
  return out;
}

/** Parses group(5) lines. */
export function parseGroup(text: string): Map<string, GroupEntry> {
  const out = new Map<string, GroupEntry>();
  for (const f of records(text, 4)) {
    const gid = toId(f[2]);
    if (gid === null || out.has(f[0]!)) continue;
    out.set(f[0]!, { name: f[0]!, gid });
  }
  return out;
}

function* records(text: string, fields: number): Generator<string[]> {
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#') || line.startsWith('+') || line.startsWith('-')) continue;
    const f = line.split(':');
    if (f.length < fields || f[0] === '') continue;
    yield f;
  }
}

function toId(s: string | undefined): number | null {
  return s !== undefined && /^\d{1,10}$/.test(s) && Number(s) <= 0xfffffffe ? Number(s) : null;
}
