import type { ChangeOp } from '../changeset.js';
import { PACKAGE_DBS } from './package-db.js';
import type { RootFs } from '../fs/trees/root-fs.js';
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { directorySource } from '../sources/directory.js';
import type { SharedDivert } from './divert.js';

/**
 * What a `stage --run` command leaves in its scratch /var that is not kept: the
 * runtime's and the package tools' own scratch (downloads, locks, apt's and dpkg's logs
 * of this run), and the package state, which is linked into the tree (PACKAGE_DBS).
 */
const NOT_CARRIED = ['tmp', 'lock', 'cache/apt', 'log/apt', 'log/dpkg.log', 'log/alternatives.log', 'cache/ldconfig', ...PACKAGE_DBS.map((d) => d.var.slice('var/'.length))];

function carried(rel: string): boolean {
  return !NOT_CARRIED.some((n) => rel === n || rel.startsWith(`${n}/`));
}

/** The scratch /var's own directories above those (lib, cache, log, lib/systemd): the machine's /var has them. */
function skeleton(rel: string): boolean {
  return NOT_CARRIED.some((n) => n.startsWith(`${rel}/`));
}

/** The path a layer op names, relative to its root without a leading slash. */
const bare = (p: string): string => p.replace(/^\/+/, '');

/**
 * What a `stage --run` command created under /var (a package's /var/lib/NAME, its
 * /var/log/NAME, /var/www/html/index.html; what a postinst made there) becomes the
 * update's initial content for the shared /var, as an image's /var content does: set
 * aside now (the shared /var is never written by a stage), and applied by finalize only
 * where the machine's /var has nothing yet, never over its state. Read like a directory
 * source (the same checks on each entry).
 */
export async function divertRunVar(varDir: string, tree: RootFs, divert: SharedDivert): Promise<void> {
  const cs = await directorySource(varDir).plan(new ReadOnlyTree(varDir));
  for await (const op of cs.ops as AsyncIterable<ChangeOp>) {
    if (op.op === 'clear' || op.op === 'remove') continue;
    const rel = bare(op.path);
    if (rel === '' || !carried(rel) || ((op.op === 'mkdir' || op.op === 'setattr') && skeleton(rel))) continue;
    if (op.op === 'hardlink' && !carried(bare(op.target))) continue;
    const moved: ChangeOp = op.op === 'hardlink' ? { ...op, path: `var/${rel}`, target: `var/${bare(op.target)}` } : { ...op, path: `var/${rel}` };
    await divert.divert(moved, tree, 'initial');
  }
}
