/** systemd-boot's entries on the ESP, and the default in its loader.conf. */
import * as path from 'node:path';
import type { Context } from '../../context.js';
import { bootEntry, parseBootEntry, type BootEntry } from '../../state/boot-entry-text.js';
import { LOADER_CONF, loaderConfWithDefault } from '../../state/loader-conf.js';
import { installKernel, removeUnusedKernels, type Bootable } from './kernels.js';
import type { SeenPaths } from './seen-paths.js';

const ESP_ENTRY = /^stagedroot-(\d{4,})\.conf$/;

/**
 * systemd-boot on an ESP (FAT: no symlinks): plain files in loader/entries/, each
 * written and renamed on its own, so there is no set to swap. The highest version is the
 * default (loader.conf says `default stagedroot-*`, state/loader-conf.ts). An entry
 * already on disk in its place (its text unchanged, its version below those above it) is
 * kept as it is: a finalize or a live apply writes one new file and removes one, and
 * never renames over the entry the machine boots, which a power cut in the middle of a
 * FAT rename can lose. The others get versions above every one on disk, the new default
 * first and the highest, so at every point the default is the old one or the new one, and
 * every file on disk names a deployment that has its kernel in place. Entries no longer
 * wanted go last, then their kernels.
 */
export function writeEspEntries(ctx: Context, esp: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const { dfs } = ctx;
  const dir = path.join(esp, 'loader', 'entries');
  const onDisk = new Map(
    seen
      .list(dir)
      .filter((f) => ESP_ENTRY.test(f))
      .map((f) => {
        const text = seen.read(path.join(dir, f)) ?? '';
        return [f, { text, version: Number(parseBootEntry(text).version ?? 0) || 0 }] as const;
      }),
  );
  const top = Math.max(0, ...[...onDisk.values()].map((e) => e.version));
  const want = list.map((b) => bootEntry(b.deployment, b.kernel, 0, arg));
  const kept = firstKept(want, onDisk);
  // The rewritten ones go above every entry on disk, in the list's order, the default first.
  const toWrite = list.slice(0, kept).map((b, i) => bootEntry(b.deployment, b.kernel, top + kept - i, arg));
  const listed = new Set(want.map((e) => e.file));
  const unwanted = [...onDisk.keys()].filter((f) => !listed.has(f));
  // Every entry's kernel, whether its entry is written or kept (a copy a power cut left incomplete is made again).
  for (const b of list) installKernel(ctx, esp, ctx.layout.tree(b.deployment.id), b.kernel);
  if (toWrite.length > 0 || unwanted.length > 0) {
    dfs.mkdir(path.join(esp, 'loader'));
    dfs.mkdir(dir);
    for (const e of toWrite) dfs.writeFileAtomic(path.join(dir, e.file), e.text);
    for (const f of unwanted) dfs.unlink(path.join(dir, f));
  }
  // Then the default: stagedroot's entries, not the distribution's (sorted first by their
  // sort-key). Written after the entries it selects; a crash before it leaves the
  // machine's own default, as before the adoption.
  const conf = path.join(esp, LOADER_CONF);
  if (list.length > 0) {
    const text = seen.read(conf);
    const wanted = loaderConfWithDefault(text);
    if (text !== wanted) dfs.writeFileAtomic(conf, wanted);
  }
  // Temp files of a write a crash interrupted (systemd-boot reads only *.conf; an older version named them .stagedroot-ID.conf.tmp-…).
  seen.stat(dir);
  dfs.removeTempLeftovers(dir, (t) => ESP_ENTRY.test(t));
  if (seen.stat(path.dirname(conf))?.isDirectory()) dfs.removeTempLeftovers(path.dirname(conf));
  removeUnusedKernels(ctx, esp, new Set(list.map((b) => b.kernel.hash)), seen);
}

const unversioned = (t: string): string => t.replace(/^version .*$/m, '');

/**
 * Where the tail of `want` (the list, default first) that stays as it is on disk starts:
 * the longest tail whose entries are there with the same text but for the version, their
 * versions rising towards the head.
 */
function firstKept(want: BootEntry[], onDisk: ReadonlyMap<string, { text: string; version: number }>): number {
  let kept = want.length;
  let below = 0;
  while (kept > 0) {
    const e = want[kept - 1]!;
    const d = onDisk.get(e.file);
    if (d === undefined || unversioned(d.text) !== unversioned(e.text) || d.version <= below) break;
    below = d.version;
    kept--;
  }
  return kept;
}
