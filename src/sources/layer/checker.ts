import type { XattrList } from '../../changeset.js';
import { StagedrootError } from '../../errors.js';
import { checkEntryPath, checkHardlinkTarget, checkId, checkSymlinkTarget, foldPath, show, type LayerLimits } from './entry-checks.js';
import type { LayerEntry } from './entry.js';
import { markerOf } from './whiteouts.js';

/** What one checked entry asks for. Paths are tree-relative ("etc/motd"). */
export type PlannedEntry =
  | { kind: 'skip' }
  | { kind: 'whiteout'; path: string }
  | { kind: 'opaque'; path: string }
  | { kind: 'dir'; path: string; mode?: number; uid?: number; gid?: number; mtime?: number; xattrs?: XattrList }
  | { kind: 'file'; path: string; size: number; mode?: number; uid?: number; gid?: number; mtime?: number; open: () => AsyncIterable<Uint8Array>; xattrs?: XattrList }
  | { kind: 'symlink'; path: string; target: string; uid?: number; gid?: number; xattrs?: XattrList }
  | { kind: 'hardlink'; path: string; target: string };

export interface DirAttrs {
  mode?: number;
  mtime?: number;
}

/**
 * Checks a layer's entries in archive order and turns each into a PlannedEntry. It keeps
 * what later entries are checked against: the layer's own symlinks (nothing may be
 * written through them), its regular files (the only valid hardlink targets, and not
 * valid parents) and its directories (their final mode and mtime, set last). Memory is
 * proportional to those path counts, never to content bytes.
 */
export class LayerChecker {
  entries = 0;
  declaredBytes = 0;
  /** folded path -> path, for the layer's own symlinks. */
  private readonly symlinks = new Map<string, string>();
  private readonly files = new Set<string>();
  readonly dirs = new Map<string, DirAttrs>();

  constructor(private readonly limits: LayerLimits, private readonly where: string) {}

  /** Its directories with their final attributes, deepest first: the order they are finished in (children before their parent). */
  dirsDeepestFirst(): [string, DirAttrs][] {
    return [...this.dirs].sort((a, b) => depth(b[0]) - depth(a[0]));
  }

  check(e: LayerEntry): PlannedEntry {
    this.entries += 1;
    if (this.entries > this.limits.maxEntries) {
      throw new StagedrootError('UNSAFE_ENTRY', `${this.where} has more than ${this.limits.maxEntries} entries (limit maxEntries); refused at ${show(e.path)}`, { path: String(e.path), option: 'maxEntries', value: this.limits.maxEntries });
    }
    this.declaredBytes += e.size;
    if (this.declaredBytes > this.limits.maxBytes) {
      throw new StagedrootError('UNSAFE_ENTRY', `${this.where} declares more than ${this.limits.maxBytes} bytes of content (limit maxBytes); refused at ${show(e.path)} (${e.size} bytes)`, { path: String(e.path), option: 'maxBytes', value: this.limits.maxBytes });
    }
    const p = checkEntryPath(e.path);
    const raw = String(e.path);
    switch (e.kind) {
      case 'char-device':
      case 'block-device':
      case 'fifo':
      case 'socket':
        throw new StagedrootError('UNSAFE_ENTRY', `The entry ${show(e.path)} is a ${e.typeName}; a layer may not create devices, FIFOs or sockets`, { path: raw });
      case 'unsupported':
        throw new StagedrootError('SOURCE_UNSUPPORTED', `The entry ${show(e.path)} has the unsupported type ${e.typeName}`, { path: raw });
    }
    if (p === '') {
      if (e.kind === 'dir') return { kind: 'skip' }; // "./": the root's own entry
      throw new StagedrootError('PATH_ESCAPE', `The entry ${show(e.path)} names the root itself`, { path: raw });
    }
    this.checkParents(p, raw);

    const marker = markerOf(p);
    if (marker !== null) {
      if (e.kind !== 'file') throw new StagedrootError('SOURCE_CORRUPT', `The whiteout ${show(e.path)} is a ${e.typeName}, not a file`, { path: raw });
      return marker.kind === 'opaque' ? { kind: 'opaque', path: marker.dir } : { kind: 'whiteout', path: marker.target };
    }

    const uid = checkId(e.uid, 'uid', raw);
    const gid = checkId(e.gid, 'gid', raw);
    const mode = e.mode === undefined ? undefined : e.mode & 0o7777;
    const mtime = e.mtime !== undefined && Number.isFinite(e.mtime) ? e.mtime : undefined;
    const xattrs = checkXattrs(e.xattrs, raw);
    switch (e.kind) {
      case 'dir':
        this.becomes(p, 'dir');
        this.dirs.set(p, { mode, mtime });
        return { kind: 'dir', path: p, mode, uid, gid, mtime, xattrs };
      case 'file': {
        if (!e.open) throw new StagedrootError('SOURCE_CORRUPT', `The entry ${show(e.path)} has no content`, { path: raw });
        this.becomes(p, 'file');
        return { kind: 'file', path: p, size: e.size, mode, uid, gid, mtime, open: e.open, xattrs };
      }
      case 'symlink': {
        const target = checkSymlinkTarget(e.linkpath, p);
        this.becomes(p, 'symlink');
        return { kind: 'symlink', path: p, target, uid, gid, xattrs };
      }
      case 'hardlink': {
        const target = checkHardlinkTarget(e.linkpath, p);
        if (!this.files.has(target)) {
          throw new StagedrootError('UNSAFE_ENTRY', `The entry ${show(e.path)} is a hardlink to ${show(target)}, which is not a regular file earlier in this layer`, { path: raw });
        }
        if (target === p) throw new StagedrootError('SOURCE_CORRUPT', `The entry ${show(e.path)} is a hardlink to itself`, { path: raw });
        this.becomes(p, 'file');
        return { kind: 'hardlink', path: p, target };
      }
    }
  }

  /** Refuses a path below one of this layer's symlinks (by folded name) or regular files. */
  private checkParents(p: string, raw: string): void {
    for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) {
      const parent = p.slice(0, i);
      const link = this.symlinks.get(foldPath(parent));
      if (link !== undefined) {
        const alias = link === parent ? '' : ` (the same name as ${JSON.stringify(parent)} up to case or Unicode normalisation)`;
        throw new StagedrootError('PATH_ESCAPE', `The entry ${JSON.stringify(raw)} goes through ${JSON.stringify(link)}, a symbolic link created earlier in this layer${alias}`, { path: raw });
      }
      if (this.files.has(parent)) {
        throw new StagedrootError('APPLY_FAILED', `The entry ${JSON.stringify(raw)} is below ${JSON.stringify(parent)}, a file earlier in this layer (ENOTDIR)`, { path: raw, errno: 'ENOTDIR' });
      }
    }
  }

  /** Records what `p` now is; a non-directory replaces a directory and everything below it. */
  private becomes(p: string, kind: 'dir' | 'file' | 'symlink'): void {
    const key = foldPath(p);
    if (this.symlinks.get(key) === p) this.symlinks.delete(key);
    this.files.delete(p);
    if (kind !== 'dir' && this.dirs.has(p)) {
      const below = p + '/';
      this.dirs.delete(p);
      for (const d of this.dirs.keys()) if (d.startsWith(below)) this.dirs.delete(d);
      for (const f of this.files) if (f.startsWith(below)) this.files.delete(f);
      for (const [k, l] of this.symlinks) if (l.startsWith(below)) this.symlinks.delete(k);
    }
    if (kind === 'file') this.files.add(p);
    if (kind === 'symlink') this.symlinks.set(key, p);
  }
}

/** Linux's limits: a name of at most 255 bytes in a known namespace, a value of at most 64 KiB. */
const XATTR_NAME = /^(security|system|trusted|user)\.[^\0]+$/;

/** An entry's extended attributes, checked: undefined when it has none. */
function checkXattrs(x: LayerEntry['xattrs'], raw: string): XattrList | undefined {
  if (x === undefined || x.length === 0) return undefined;
  for (const [name, value] of x) {
    if (!XATTR_NAME.test(name) || Buffer.byteLength(name) > 255) {
      throw new StagedrootError('SOURCE_UNSUPPORTED', `The entry ${show(raw)} has the extended attribute ${JSON.stringify(name)}, outside the Linux namespaces (security, system, trusted, user)`, { path: raw, value: name });
    }
    if (value.length > 65536) throw new StagedrootError('UNSAFE_ENTRY', `The entry ${show(raw)} has a ${value.length}-byte extended attribute ${name} (limit 65536)`, { path: raw, value: name });
  }
  return x;
}

function depth(p: string): number {
  let n = 1;
  for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) n += 1;
  return n;
}
