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
 * written and renamed on its own, so there is no set to swap. Versions only grow: the
 * entries are written lowest first, each with a version above every one on disk, so at
 * every point the highest (systemd-boot's default among them: loader.conf says
 * `default stagedroot-*`, state/loader-conf.ts) is the old default or the new one, and
 * every file on disk names a deployment that has its kernel in place. Entries no longer
 * wanted go last, then their kernels.
 */
export function writeEspEntries(ctx: Context, esp: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const { dfs } = ctx;
  const dir = path.join(esp, 'loader', 'entries');
  const onDisk = seen
    .list(dir)
    .filter((f) => ESP_ENTRY.test(f))
    .map((f) => {
      const text = seen.read(path.join(dir, f)) ?? '';
      return { file: f, text, version: Number(parseBootEntry(text).version ?? 0) || 0 };
    })
    .sort((a, b) => b.version - a.version);
  const top = onDisk[0]?.version ?? 0;
  const withVersions = (base: number): BootEntry[] => list.map((b, i) => bootEntry(b.deployment, b.kernel, base + list.length - 1 - i, arg));
  // Up to date: the same files, in the same order, with the same text but for their versions.
  const unversioned = (t: string): string => t.replace(/^version .*$/m, '');
  const want = withVersions(0);
  const same = want.length === onDisk.length && want.every((e, i) => onDisk[i]!.file === e.file && unversioned(onDisk[i]!.text) === unversioned(e.text));
  if (!same) {
    dfs.mkdir(path.join(esp, 'loader'));
    dfs.mkdir(dir);
    for (const b of list) installKernel(ctx, esp, ctx.layout.tree(b.deployment.id), b.kernel);
    const entries = withVersions(top + 1);
    for (const e of [...entries].reverse()) dfs.writeFileAtomic(path.join(dir, e.file), e.text);
    const keep = new Set(entries.map((e) => e.file));
    for (const e of onDisk) if (!keep.has(e.file)) dfs.unlink(path.join(dir, e.file));
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
