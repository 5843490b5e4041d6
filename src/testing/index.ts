/**
 * Helpers for users' own tests (and stagedroot's): a temp-dir sysroot, a tree builder,
 * a tree hash, reboot() (finalize + boot), and the fault hooks of crash tests (killAfter,
 * countingHook). Import from "stagedroot/testing".
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { Sysroot, type SysrootOptions } from '../sysroot.js';
import type { InitOptions } from '../stage/init.js';
import type { BootResult } from '../boot/boot.js';
import type { FinalizeResult } from '../commit/finalize.js';
import { walkEntries } from '../fs/core/walk.js';
import { readLinkTarget } from '../fs/manifests/manifest.js';

export { killAfter, countingHook } from './faults.js';
export type { FaultHook } from '../fs/core/faults.js';

/** A tree described as data: path → file content, or an entry object. */
export type TreeSpec = Record<
  string,
  | string
  | Buffer
  | { content: string | Buffer; mode?: number }
  | { dir: true; mode?: number }
  | { symlink: string }
  | { hardlink: string }
>;

/** Writes a tree described as data under `dir` (parents created as needed). */
export function buildTree(dir: string, spec: TreeSpec): string {
  fs.mkdirSync(dir, { recursive: true });
  for (const [rel, v] of Object.entries(spec)) {
    const p = path.join(dir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    if (typeof v === 'string' || Buffer.isBuffer(v)) {
      fs.writeFileSync(p, v);
    } else if ('dir' in v) {
      fs.mkdirSync(p, { recursive: true });
      if (v.mode !== undefined) fs.chmodSync(p, v.mode);
    } else if ('symlink' in v) {
      fs.symlinkSync(v.symlink, p);
    } else if ('hardlink' in v) {
      fs.linkSync(path.join(dir, v.hardlink), p);
    } else {
      fs.writeFileSync(p, v.content);
      if (v.mode !== undefined) fs.chmodSync(p, v.mode);
    }
  }
  return dir;
}

/**
 * A hash of a whole tree: every path, type, mode, owner, size, content and link target
 * (not times, not extended attributes), leaving out the subtrees `exclude` names
 * (tree-relative paths). Two trees with the same hash have the same names and bytes.
 */
export function hashTree(dir: string, o: { exclude?: readonly string[] } = {}): string {
  const exclude = o.exclude ?? [];
  const h = createHash('sha256');
  // The byte walker (names that are not UTF-8 kept as they are, escaped in `rel`), in sorted order.
  walkEntries(dir, {
    enter(r, host) {
      if (exclude.some((e) => r === e || r.startsWith(`${e}/`))) return false;
      const st = fs.lstatSync(host);
      h.update(`${r}\0${st.mode}\0${st.uid}\0${st.gid}\0`);
      if (st.isFile()) h.update(`${st.size}\0`).update(fs.readFileSync(host));
      else if (st.isSymbolicLink()) h.update(readLinkTarget(host));
      h.update('\n');
      return st.isDirectory();
    },
  });
  return h.digest('hex');
}

export interface TempSysroot {
  sysroot: Sysroot;
  /** The sysroot directory. */
  dir: string;
  /** A scratch directory beside it for sources and canaries. */
  scratch: string;
  cleanup(): void;
}

/** A sysroot in a fresh temp dir, its first deployment built from `tree` (or empty). */
export async function tempSysroot(o: { tree?: TreeSpec; prefix?: string } & InitOptions & SysrootOptions = {}): Promise<TempSysroot> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), o.prefix ?? 'stagedroot-test-'));
  const dir = path.join(base, 'sysroot');
  const scratch = path.join(base, 'scratch');
  fs.mkdirSync(scratch);
  let fromDirectory = o.fromDirectory;
  if (o.tree) fromDirectory = buildTree(path.join(scratch, 'initial-tree'), o.tree);
  const sysroot = await Sysroot.init(dir, { ...o, fromDirectory });
  return { sysroot, dir, scratch, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) };
}

/** A simulated reboot: finalize at shutdown, then boot. */
export async function reboot(sysroot: Sysroot): Promise<{ finalize: FinalizeResult; boot: BootResult }> {
  const finalize = await sysroot.finalize();
  const boot = await sysroot.boot();
  return { finalize, boot };
}
