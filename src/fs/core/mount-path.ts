import * as fs from 'node:fs';
import * as path from 'node:path';

/** A directory's place on its filesystem, as a bootloader or the initramfs sees that filesystem. */
export interface FilesystemPath {
  /** Where the filesystem (or the bind mount holding the directory) is mounted here. */
  mountPoint: string;
  /** The path of the filesystem that is mounted there (mountinfo's root: `/` unless a bind mount of a subdirectory). */
  mountRoot: string;
  /** The directory's path from the filesystem's root (a bind mount's root included). */
  onFilesystem: string;
  dev: number;
}

/** /proc/self/mountinfo escapes space, tab, newline and backslash as octal. */
function unescape(field: string): string {
  return field.includes('\\') ? field.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8))) : field;
}

/**
 * Where `dir` sits on its filesystem: the mount that holds it (the longest mount point
 * above its real path; the later of two on one point) and its path from that
 * filesystem's root. `/stagedroot` before the first boot under stagedroot and
 * `/sysroot/stagedroot` after it are both `/stagedroot` on the physical root. Null when
 * mountinfo cannot be read (not Linux). Read on every `open` with a boot directory (the
 * entries' `stagedroot=`): the lines are scanned for their 4th and 5th fields, not split.
 */
export function filesystemPath(dir: string, mountinfo = '/proc/self/mountinfo'): FilesystemPath | null {
  let text: string;
  let real: string;
  try {
    text = fs.readFileSync(mountinfo, 'utf8');
    real = fs.realpathSync.native(dir);
  } catch {
    return null;
  }
  let best: { point: string; root: string } | null = null;
  for (let start = 0; start < text.length; ) {
    const eol = text.indexOf('\n', start);
    const end = eol < 0 ? text.length : eol;
    // Fields: ID, parent ID, major:minor, root, mount point, ...
    let i = start;
    for (let n = 0; n < 3 && i >= 0; n++) {
      const sp = text.indexOf(' ', i);
      i = sp < 0 || sp >= end ? -1 : sp + 1;
    }
    const j = i < 0 ? -1 : text.indexOf(' ', i);
    if (j >= 0 && j < end) {
      const k = text.indexOf(' ', j + 1);
      const root = unescape(text.slice(i, j));
      const point = unescape(text.slice(j + 1, k < 0 || k > end ? end : k));
      const inside = point === '/' || real === point || real.startsWith(`${point}/`);
      if (inside && (best === null || point.length >= best.point.length)) best = { point, root };
    }
    start = end + 1;
  }
  if (best === null) return null;
  const rel = path.relative(best.point, real);
  return { mountPoint: best.point, mountRoot: best.root, onFilesystem: path.posix.join(best.root, rel), dev: fs.statSync(real).dev };
}

/** Where a path on the filesystem of `fp` is reachable here (through the mount `fp` was found under), or null when it is outside that mount. */
export function pathHere(fp: FilesystemPath, onFilesystem: string): string | null {
  const rel = path.posix.relative(fp.mountRoot, onFilesystem);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return null;
  return path.join(fp.mountPoint, rel);
}

/**
 * The filesystem type (mountinfo's field after ` - `: `ext4`, `vfat`) of the mounts of the
 * device `dev` (a stat's `dev`); undefined when mountinfo cannot be read, names no mount of
 * that device, or `dev` does not fit the 32 bits this reads (major below 4096, minor below
 * 2^20: every device number a block device gets), and when two mounts of it disagree.
 */
export function filesystemTypeOfDevice(dev: number, mountinfo = '/proc/self/mountinfo'): string | undefined {
  if (!Number.isInteger(dev) || dev < 0 || dev > 0xffffffff) return undefined;
  const want = `${(dev >>> 8) & 0xfff}:${(dev & 0xff) | ((dev >>> 12) & 0xfff00)}`;
  let text: string;
  try {
    text = fs.readFileSync(mountinfo, 'utf8');
  } catch {
    return undefined;
  }
  let type: string | undefined;
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    if (f[2] !== want) continue;
    const sep = f.indexOf('-', 6);
    const t = sep < 0 ? undefined : f[sep + 1];
    if (t === undefined || t === '' || (type !== undefined && type !== t)) return undefined;
    type = t;
  }
  return type;
}
