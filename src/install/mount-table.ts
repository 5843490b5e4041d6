import * as path from 'node:path';

/** Decodes the octal escapes of /proc/self/mountinfo and /proc/swaps (`\040` is a space). */
export function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The mount points /proc/self/mountinfo lists (its fifth field), decoded. */
export function mountPoints(mountinfo: string): string[] {
  const out: string[] = [];
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    if (fields.length >= 5 && fields[4]!.startsWith('/')) out.push(unescapeMountPath(fields[4]!));
  }
  return out;
}

/** The swap files /proc/swaps lists (type `file`), decoded. */
export function swapFiles(swaps: string): string[] {
  const out: string[] = [];
  for (const line of swaps.split('\n').slice(1)) {
    const m = /^(\S+)\s+file\s/.exec(line);
    if (m) out.push(unescapeMountPath(m[1]!));
  }
  return out;
}

/** `p` relative to `root` when strictly below it ("a/b"), else null. */
export function below(root: string, p: string): string | null {
  const rel = path.relative(root, p);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) return null;
  return rel;
}
