import * as fs from 'node:fs';
import { knownFile } from './copy-tree.js';
import type { FaultHook } from './faults.js';
import { hashFile } from './hash.js';
import { ManifestReader, ManifestWriter, entryFromStat } from './manifest.js';
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
  /** Entries a copy would not recreate (devices, FIFOs, sockets), removed from the snapshot. */
  skipped: { rel: string; why: string }[];
}

/**
 * The manifest of a snapshot of a deployment tree, from the base tree's manifest: the
 * lines under the trusted prefixes are copied through unparsed and the trees under them
 * are never walked; the rest of the snapshot is walked and recorded as a copy records it
 * (unchanged files keep their line, changed ones are hashed). O(lines) of string work,
 * O(untrusted entries) of disk work.
 */
export function snapshotManifest(a: SnapshotManifestArgs, faults: FaultHook, checkAbort: () => void = () => {}): SnapshotManifestResult {
  const res: SnapshotManifestResult = { entries: 0, bytes: 0, walked: 0, hashed: 0, skipped: [] };
  // Only a prefix that is a real directory in the snapshot is trusted.
  const trust = a.trust.filter((t) => {
    try {
      return fs.lstatSync(`${a.tree}/${t}`).isDirectory();
    } catch {
      return false;
    }
  });
  const trusted = (p: string): boolean => trust.some((t) => p !== t && isUnder(p, t));
  const prev = new ManifestReader(a.base);
  const out = new ManifestWriter(a.out, faults);
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
  const visit = (relDir: string): void => {
    const hostDir = relDir === '' ? a.tree : `${a.tree}/${relDir}`;
    for (const name of fs.readdirSync(hostDir).sort()) {
      checkAbort();
      const rel = relDir === '' ? name : `${relDir}/${name}`;
      const host = `${a.tree}/${rel}`;
      const st = fs.lstatSync(host);
      drain(rel);
      const raw = prev.peekRaw()?.p === rel ? prev.nextRaw() : null;
      res.walked += 1;
      if (st.isFile()) {
        const known = knownFile(prev, raw, rel, st, true);
        if (typeof known === 'string') emit(rel, known, st.size);
        else {
          if (known === null) res.hashed += 1;
          emit(rel, JSON.stringify(entryFromStat(rel, st, { h: known?.h ?? hashFile(host) })), st.size);
        }
      } else if (st.isDirectory() || st.isSymbolicLink()) {
        emit(rel, JSON.stringify(entryFromStat(rel, st, st.isSymbolicLink() ? { l: fs.readlinkSync(host) } : {})), 0);
        if (st.isDirectory() && !trust.includes(rel)) visit(rel);
      } else {
        // As a copy skips it: not in the new tree, not in its manifest.
        try {
          fs.unlinkSync(host);
        } catch (err) {
          throw ioError(err, rel, host, 'sysroot');
        }
        faults.afterMutation('unlink', host);
        res.skipped.push({ rel, why: 'not a file, directory or symlink (device, FIFO or socket)' });
      }
    }
  };
  try {
    visit('');
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
