import * as path from 'node:path';
import { makeContext, type ContextOptions } from '../context.js';
import { StagedrootError } from '../errors.js';
import type { CopyProgress } from '../fs/trees/copy-tree.js';
import { exists, listDir, readText, statPath } from '../fs/core/host-paths.js';
import { RootFs } from '../fs/trees/root-fs.js';
import { initSysroot } from '../stage/init.js';
import type { BootLoader } from '../boot/entries/sync.js';
import { runOperation } from '../operations/run-operation.js';
import { loadState } from '../store/state-file.js';
import { checkWaitSeconds } from '../util/options.js';
import { below, mountPoints, swapFiles } from './mount-table.js';
import { PACKAGE_DBS, relocatePackageDbs } from '../persistent-dirs/package-db.js';
import { environmentFile } from './unit-text.js';

/**
 * What becomes of the running root's top directories in the first deployment:
 * - var, home, root, srv: shared (machine state and people's data: one copy, bound into
 *   every deployment, never rolled back). Their files are hardlinked, not copied.
 * - etc: copied (it is mutable, and finalize merges the booted copy's local changes).
 * - usr, opt, boot and the rest: the OS, hardlinked; /boot stays in the tree because a
 *   Debian deployment's kernels and initramfs live there (boot/vmlinuz-V, initrd.img-V),
 *   and a kernel installed by `stage --run` gets its initramfs built there.
 * - proc, sys, dev, run, tmp and every mount point: empty directories (another filesystem
 *   is never entered); lost+found and swap files: left out.
 */
export const ADOPT_SHARED = ['var', 'home', 'root', 'srv'] as const;
/** Always empty in a deployment: the kernel's and the runtime's, whatever is (or is not) mounted there now. */
export const ADOPT_HOLLOW = ['proc', 'sys', 'dev', 'run', 'tmp'] as const;
const ADOPT_OMIT = ['lost+found'] as const;
/** Copied, not linked: mutable in place. */
const ADOPT_COPIED = ['etc'] as const;

export interface AdoptOptions extends ContextOptions {
  /** The running root (default `/`; a test's fake machine otherwise). */
  root?: string;
  /** The sysroot's path (default `ROOT/stagedroot`): on the root's filesystem, never inside another mount. */
  sysroot?: string;
  label?: string;
  /** Shared directories (default var, home, root, srv). */
  shared?: string[];
  bootTries?: number;
  /** Boot entries are written here (see `init --boot-dir`), for the deployments that ship a kernel. */
  bootDir?: string;
  /** Their form (see `init --boot-loader`): `grub` for Debian's GRUB (bootDir /boot/grub), `systemd-boot` (bootDir the ESP), `bls` (default). */
  bootLoader?: BootLoader;
  /**
   * The first deployment's kernel arguments (with a boot dir). Default: those the machine
   * booted with now (/proc/cmdline without BOOT_IMAGE=, initrd= and stagedroot ones),
   * plus `stagedroot=SYSROOT` (the sysroot's path on the root filesystem).
   */
  kernelArguments?: string[];
  /** Where the running kernel's command line is read (default /proc/cmdline). */
  cmdline?: string;
  /** Where the mount table and the swap list are read (default /proc/self/mountinfo, /proc/swaps). */
  mountinfo?: string;
  swaps?: string;
  waitSeconds?: number;
  onProgress?: (p: CopyProgress) => void;
}

export interface AdoptResult {
  root: string;
  sysroot: string;
  /** The first deployment (its tree is the running root, hardlinked). */
  id: string;
  /** True when the root was adopted already (nothing was done). */
  alreadyAdopted: boolean;
  shared: string[];
  /** Left empty in the deployment (mount points, kernel and runtime directories). */
  hollow: string[];
  /** Left out (the sysroot, lost+found, swap files). */
  omitted: string[];
  /** Package databases moved under usr/ (their var/ path, now a symbolic link). */
  packageDbs: string[];
  entries: number;
  /** The file that tells the CLI and units where the sysroot is, inside the root. */
  environmentFile: string;
}

function mustBeAbsolute(option: string, v: string): string {
  if (!path.isAbsolute(v) || v.split('/').includes('..')) {
    throw new StagedrootError('USAGE', `Expected --${option} to be an absolute path without "..", got ${JSON.stringify(v)}`, { option, value: v });
  }
  return path.resolve(v);
}

/** What the walk of the root skips, and why the sysroot's place is acceptable. */
export function planAdoption(root: string, sysroot: string, mountinfo: string, swaps: string, shared: readonly string[]): { hollow: string[]; omit: string[]; device: number } {
  const rootSt = statPath(root);
  if (rootSt === null || !rootSt.isDirectory()) throw new StagedrootError('USAGE', `--root ${root} is not a directory`, { option: 'root', value: root });
  const sysRel = below(root, sysroot);
  if (sysRel === null) throw new StagedrootError('USAGE', `The sysroot ${sysroot} must be inside the root ${root} (on its filesystem), and not the root itself`, { option: 'sysroot', value: sysroot });
  const mounts = mountPoints(mountinfo)
    .map((m) => below(root, m))
    .filter((m): m is string => m !== null);
  const inside = (rel: string, dirs: readonly string[]): string | undefined => dirs.find((d) => rel === d || rel.startsWith(`${d}/`));
  const badPlace = inside(sysRel, mounts) ?? inside(sysRel, [...ADOPT_HOLLOW, ...ADOPT_COPIED, 'usr', ...shared]);
  if (badPlace !== undefined) {
    throw new StagedrootError('USAGE', `The sysroot ${sysroot} cannot be inside /${badPlace}: it must be a directory of the root filesystem outside the OS tree, /etc and the shared directories (e.g. ${path.join(root, 'stagedroot')})`, { option: 'sysroot', value: sysroot });
  }
  const parent = statPath(path.dirname(sysroot));
  if (parent === null || parent.dev !== rootSt.dev) {
    throw new StagedrootError('USAGE', `The sysroot's parent ${path.dirname(sysroot)} is ${parent === null ? 'missing' : 'on another filesystem than the root'}: the sysroot must be on the root's filesystem (its files are hardlinked)`, { option: 'sysroot', value: sysroot });
  }
  const hollow = [...new Set([...ADOPT_HOLLOW.filter((d) => statPath(path.join(root, d))?.isDirectory() ?? false), ...mounts])].sort();
  const swap = swapFiles(swaps)
    .map((f) => below(root, f))
    .filter((f): f is string => f !== null);
  const omit = [...new Set([sysRel, ...ADOPT_OMIT.filter((d) => exists(path.join(root, d))), ...swap])].sort();
  return { hollow, omit, device: rootSt.dev };
}

/**
 * Adopts a running root in place: a sysroot on the same filesystem whose first
 * deployment is that root, its files hardlinked (etc/ and the package databases copied),
 * other filesystems and the sysroot itself never entered. Everything is built in the
 * sysroot's work/ and committed by one rename then the state file, as `init` does: an
 * interrupted adoption leaves no sysroot (the machine boots as before, nothing outside
 * the sysroot was written), and the next run clears the leftovers and starts again.
 * Once committed, `ROOT/etc/stagedroot/environment` names the sysroot. The machine keeps
 * booting the old way until its kernel command line says `stagedroot=PATH`.
 */
export async function adoptRoot(o: AdoptOptions = {}): Promise<AdoptResult> {
  const root = mustBeAbsolute('root', o.root ?? '/');
  const sysroot = mustBeAbsolute('sysroot', o.sysroot ?? path.join(root, 'stagedroot'));
  const shared = o.shared ?? [...ADOPT_SHARED];
  const plan = planAdoption(root, sysroot, readText(o.mountinfo ?? '/proc/self/mountinfo') ?? '', readText(o.swaps ?? '/proc/swaps') ?? '', shared);
  const ctx = makeContext(sysroot, o);
  const envPath = '/etc/stagedroot/environment';
  const sysrootInRoot = `/${below(root, sysroot)!}`;
  const writeEnvironment = (): void => {
    const rfs = new RootFs(root, { faults: ctx.faults });
    rfs.mkdir('/etc/stagedroot', { mode: 0o755 });
    rfs.writeFile(envPath, Buffer.from(environmentFile({ cli: '', sysroot: sysrootInRoot })), { mode: 0o644 });
  };
  const result = (id: string, alreadyAdopted: boolean, packageDbs: string[], entries: number): AdoptResult => ({
    root,
    sysroot,
    id,
    alreadyAdopted,
    shared,
    hollow: plan.hollow,
    omitted: plan.omit,
    packageDbs,
    entries,
    environmentFile: envPath,
  });
  if (exists(ctx.layout.stateFile) || exists(ctx.layout.stateBackup)) {
    const s = loadState(ctx.layout).state;
    const first = s.deployments[0];
    if (first?.source !== adoptionSource(root)) throw new StagedrootError('SYSROOT_EXISTS', `${sysroot} already holds a sysroot that is not an adoption of ${root}`, { path: sysroot });
    writeEnvironment();
    return result(first.id, true, PACKAGE_DBS.map((d) => d.var).filter((v) => exists(path.join(sysroot, 'shared', v))), first.entries ?? 0);
  }
  let moved: string[] = [];
  await runOperation(ctx, 'adopt', checkWaitSeconds(o.waitSeconds ?? 0), () =>
    initSysroot(ctx, {
      fromDirectory: root,
      fromPolicy: {
        hardlinkPrefixes: listDir(root).filter((n) => !(ADOPT_COPIED as readonly string[]).includes(n)),
        copyPrefixes: PACKAGE_DBS.map((d) => d.var),
        mode: 'reflink',
      },
      fromExclude: plan,
      sourceDescription: adoptionSource(root),
      label: o.label ?? 'adopted',
      shared,
      bootTries: o.bootTries,
      ...(o.bootLoader === undefined ? {} : { bootLoader: o.bootLoader }),
      ...(o.bootDir === undefined ? {} : { bootDir: o.bootDir, kernelArguments: o.kernelArguments ?? adoptedKernelArguments(readText(o.cmdline ?? '/proc/cmdline') ?? '', sysrootInRoot) }),
      onCopy: o.onProgress,
      prepareTree: (tree) => {
        moved = relocatePackageDbs(tree);
      },
    }),
  );
  writeEnvironment();
  const s = loadState(ctx.layout).state;
  return result(s.current, false, moved, s.deployments[0]?.entries ?? 0);
}

/** The source a first deployment adopted from records (how a re-run knows its own adoption). */
function adoptionSource(root: string): string {
  return `adopted running root ${root}`;
}

/** The running kernel's arguments for the adopted deployment: what booted it, pointed at the sysroot. */
export function adoptedKernelArguments(cmdline: string, sysrootInRoot: string): string[] {
  const kept = cmdline
    .trim()
    .split(/\s+/)
    .filter((a) => a !== '' && !/^(BOOT_IMAGE|initrd|stagedroot|stagedroot\.[a-z.-]+)=/.test(a) && a !== 'stagedroot');
  return [...kept, `stagedroot=${sysrootInRoot}`];
}
