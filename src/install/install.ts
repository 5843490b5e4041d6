import * as path from 'node:path';
import { StagedrootError } from '../errors.js';
import { readText, writableAt, type statPath } from '../fs/core/host-paths.js';
import { RootFs } from '../fs/trees/root-fs.js';
import { runCommand } from '../util/run-command.js';
import { DROPIN_FILES, INITRAMFS_FILES, UNIT_NAMES, packageDir } from './package-files.js';
import { environmentFile, renderUnit, type UnitTarget } from './unit-text.js';

export interface InstallOptions {
  /** The root to install into (default `/`): a host, or an image being built. */
  root?: string;
  /** The sysroot's path on the running host (e.g. `/sysroot`). */
  sysroot: string;
  /** The stagedroot CLI's path on the running host (default: the CLI running now). */
  cli: string;
  /** Enable the units with `systemctl --root` (default true). */
  enable?: boolean;
}

export interface InstallResult {
  root: string;
  /** Paths written, inside the root. */
  written: string[];
  enabled: string[];
  warnings: string[];
}

function absolute(option: string, value: string): string {
  if (!path.isAbsolute(value) || value.split('/').includes('..')) {
    throw new StagedrootError('USAGE', `Expected --${option} to be an absolute path without "..", got ${JSON.stringify(value)}`, { option, value });
  }
  return path.normalize(value);
}

function packageText(rel: string): string {
  const file = path.join(packageDir(), rel);
  const text = readText(file);
  if (text === null) throw new StagedrootError('IO', `The package file ${file} is missing: reinstall stagedroot`, { path: file });
  return text;
}

/** What a path in the root resolves to (symlinks followed inside the root), or null when it does not exist. */
function statIn(rfs: RootFs, p: string): ReturnType<typeof statPath> {
  try {
    return rfs.resolve(p, { followLast: true }).stat;
  } catch (err) {
    if (err instanceof StagedrootError && err.code !== 'PATH_ESCAPE') return null;
    throw err;
  }
}

/**
 * Installs what a host needs to boot and update through stagedroot: the units (pointing
 * at the CLI and the sysroot given), /etc/stagedroot/environment, and the initramfs step
 * with its dracut module and initramfs-tools hook. The initramfs itself is rebuilt by the
 * user's tool (`dracut --add stagedroot`, `update-initramfs -u`).
 */
export async function installHost(o: InstallOptions): Promise<InstallResult> {
  const root = path.resolve(o.root ?? '/');
  const t: UnitTarget = { cli: absolute('cli', o.cli), sysroot: absolute('sysroot', o.sysroot) };
  const rfs = new RootFs(root);
  const warnings: string[] = [];
  const cli = statIn(rfs, t.cli);
  if (cli === null || !cli.isFile() || (cli.mode & 0o111) === 0) {
    throw new StagedrootError('USAGE', `The CLI ${t.cli} is not an executable file in ${root}: the units would fail to start; pass --cli with the path where stagedroot is installed`, { option: 'cli', value: t.cli });
  }
  if (statIn(rfs, path.join(t.sysroot, 'state.json')) === null) {
    warnings.push(`there is no sysroot at ${t.sysroot} in ${root} yet: stagedroot-boot.service fails (loudly) until \`stagedroot init --sysroot ${t.sysroot}\` makes one there`);
  }
  // Plan every file first (a missing package file stops here), then check that every
  // target can be written, and only then write: never a half-install.
  const plan: { path: string; text: string; mode: number }[] = [
    { path: '/etc/stagedroot/environment', text: environmentFile(t), mode: 0o644 },
    ...UNIT_NAMES.map((unit) => ({ path: `/etc/systemd/system/${unit}`, text: renderUnit(packageText(`units/${unit}`), t), mode: 0o644 })),
    ...DROPIN_FILES.map((f) => ({ path: f.to, text: packageText(f.from), mode: f.mode })),
    ...INITRAMFS_FILES.map((f) => ({ path: f.to, text: packageText(f.from), mode: f.mode })),
  ];
  const blocked = new Map<string, string>();
  for (const f of plan) {
    const w = writableAt(path.join(root, f.path), root);
    if (!w.writable) blocked.set(w.dir, w.errno ?? 'not writable');
  }
  if (blocked.size > 0) {
    const where = [...blocked].map(([d, e]) => `${d} (${e})`).join(', ');
    throw new StagedrootError(
      'READ_ONLY',
      `Nothing was installed: ${where} cannot be written. On a machine booted through stagedroot, /usr is the booted deployment's and read-only; install into the next deployment instead: \`stagedroot stage --run 'stagedroot install --sysroot ${t.sysroot}'\`, then reboot`,
      { path: [...blocked.keys()][0] },
    );
  }
  const written: string[] = [];
  for (const f of plan) {
    rfs.mkdir(path.dirname(f.path));
    rfs.writeFile(f.path, Buffer.from(f.text), { mode: f.mode });
    written.push(f.path);
  }
  const enabled: string[] = [];
  if (o.enable !== false) {
    const r = await runCommand({ file: 'systemctl', args: ['--root', root, 'enable', ...UNIT_NAMES], display: 'systemctl --root ROOT enable' }, { timeoutMs: 60_000 });
    if (r.notRunnable) throw new StagedrootError('TOOL_MISSING', `Cannot enable the units: systemctl ${r.notRunnable}`, { value: 'systemctl' });
    if (!r.ok) throw new StagedrootError('IO', `systemctl --root ${root} enable failed (exit ${r.exitCode}): ${r.output.trim()}`, { value: r.output });
    enabled.push(...UNIT_NAMES);
  }
  return { root, written, enabled, warnings };
}
