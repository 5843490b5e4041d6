import * as fs from 'node:fs';
import { hashFile } from './hash.js';
import { ManifestReader, ManifestWriter, entryFromStat, isFileLineFor, readEntry } from './manifest.js';
import { childPath } from './names.js';
import type { TaskHooks } from './tree-tasks.js';
import { readNames } from './walk.js';
import { readXattrs, xattrDigest, xattrsSupported } from './xattr.js';
import { comparePaths, isUnder } from './paths.js';
import { ioError } from './root-fs.js';

export interface SnapshotManifestArgs {
  /** The snapshot of the base tree. */
  tree: string;
  /** The base tree's manifest. */
  base: string;
  out: string;
  /**
   * Prefixes whose entries are taken from the base manifest without a look at the tree
   * (the hardlink prefixes: usr/ is read-only on a booted host). Everything else is
   * walked, as a copy would walk it, so local changes the running system made there
   * are recorded.
   */
  trust: string[];
}

export interface SnapshotManifestResult {
  entries: number;
  bytes: number;
  walked: number;
  hashed: number;
}

/**
 * The manifest of a snapshot of a deployment tree, from the base tree's manifest: the
 * lines under the trusted prefixes are copied through unparsed and the trees under them
 * are never walked; the rest of the snapshot is walked and recorded as a copy records it
 * (unchanged files keep their line, changed ones are hashed). O(lines) of string work,
 * O(untrusted entries) of disk work.
 */
export function snapshotManifest(a: SnapshotManifestArgs, h: Pick<TaskHooks, 'faults' | 'checkAbort' | 'skip'>): SnapshotManifestResult {
  const res: SnapshotManifestResult = { entries: 0, bytes: 0, walked: 0, hashed: 0 };
  // Only a prefix that is a real directory in the snapshot is trusted.
  const trust = a.trust.filter((t) => {
    try {
      return fs.lstatSync(`${a.tree}/${t}`).isDirectory();
    } catch {
      return false;
    }
  });
  const trusted = (p: string): boolean => trust.some((t) => p !== t && isUnder(p, t));
  const withXattrs = xattrsSupported(a.tree);
  const digest = (host: string | Buffer): string | undefined => (withXattrs ? xattrDigest(readXattrs(host)) : undefined);
  const prev = new ManifestReader(a.base);
  const out = new ManifestWriter(a.out, h.faults);
  const emit = (p: string, line: string, size: number): void => {
    out.writeLine(p, line);
    res.entries += 1;
    res.bytes += size;
  };
  /** Base lines before `rel`: copied when trusted, dropped otherwise (gone from the tree). */
  const drain = (rel: string | null): void => {
    for (let r = prev.peekRaw(); r !== null && (rel === null || comparePaths(r.p, rel) < 0); r = prev.peekRaw()) {
      prev.nextRaw();
      if (trusted(r.p)) emit(r.p, r.line, sizeOf(r.line));
    }
  };
  const visit = (relDir: string, hostDir: string | Buffer): void => {
    for (const name of readNames(hostDir)) {
      h.checkAbort();
      const rel = relDir === '' ? name : `${relDir}/${name}`;
      const host = childPath(hostDir, name);
      const st = fs.lstatSync(host);
      drain(rel);
      const raw = prev.peekRaw()?.p === rel ? prev.nextRaw() : null;
      res.walked += 1;
      if (st.isFile()) {
        // As a copy records it: the old line when nothing changed, the old hash when size and mtime match.
        const x = digest(host);
        if (raw !== null && isFileLineFor(raw.line, rel, st, x)) {
          emit(rel, raw.line, st.size);
        } else {
          const old = raw === null ? null : prev.entryOf(raw);
          const known = old !== null && old.t === 'f' && old.s === st.size && old.mt === Math.trunc(st.mtimeMs) ? old.h : undefined;
          if (known === undefined) res.hashed += 1;
          emit(rel, JSON.stringify(entryFromStat(rel, st, { h: known ?? hashFile(host), x })), st.size);
        }
      } else if (st.isDirectory() || st.isSymbolicLink() || st.isFIFO()) {
        emit(rel, JSON.stringify(readEntry(rel, host, st)), 0);
        if (st.isDirectory() && !trust.includes(rel)) visit(rel, host);
      } else {
        // As a copy skips them: sockets and device nodes are not kept, nor recorded.
        try {
          fs.unlinkSync(host);
        } catch (err) {
          throw ioError(err, rel, String(host), 'sysroot');
        }
        h.faults.afterMutation('unlink', String(host));
        h.skip(rel, st.isSocket() ? 'socket' : 'device node');
      }
    }
  };
  try {
    visit('', a.tree);
    drain(null);
  } finally {
    prev.close();
    out.close(false);
  }
  return res;
}

/** The size recorded in a file's manifest line, read without a parse (0 for others). */
function sizeOf(line: string): number {
  const i = line.indexOf(',"s":');
  if (i === -1) return 0;
  return Number.parseInt(line.slice(i + 5, i + 25), 10) || 0;
}
