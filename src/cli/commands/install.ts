import * as path from 'node:path';
import type { Command } from 'commander';
import { StagedrootError } from '../../errors.js';
import { installHost } from '../../install/install.js';
import { action, common, sysrootDir, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

interface InstallCliOptions extends CommonOptions {
  root: string;
  cli?: string;
  enable: boolean;
}

/** The CLI's path on the host: the one running now, seen from inside the root. */
function defaultCli(root: string): string {
  const running = process.argv[1];
  if (running === undefined || !path.isAbsolute(running)) {
    throw new StagedrootError('USAGE', 'Cannot tell where the stagedroot CLI is: pass --cli PATH', { option: 'cli' });
  }
  if (root === '/') return running;
  const rel = path.relative(root, running);
  if (rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new StagedrootError('USAGE', `The running CLI ${running} is outside --root ${root}: pass --cli with its path on the host (e.g. /usr/local/bin/stagedroot)`, { option: 'cli', value: running });
  }
  return `/${rel}`;
}

export function installCommand(program: Command, env: CliEnv): void {
  common(program.command('install'))
    .description('install the systemd units (for this CLI and sysroot) and the initramfs step with its dracut and initramfs-tools wiring')
    .option('--root <dir>', 'install into this root (an image being built) instead of /', '/')
    .option('--cli <path>', 'the stagedroot CLI on the host (default: the one running)')
    .option('--no-enable', 'write the units without enabling them')
    .addHelpText('after', '\nThen rebuild the initramfs: `dracut --force --add stagedroot` or `update-initramfs -u`,\nand add stagedroot=SYSROOT_PATH (the sysroot\'s path on the root filesystem) to the kernel command line.')
    .action(
      action(env, async (o: InstallCliOptions) => {
        const root = path.resolve(o.root);
        const r = await installHost({ root, sysroot: sysrootDir(env, o), cli: o.cli ?? defaultCli(root), enable: o.enable });
        for (const w of r.warnings) env.io.err(`stagedroot: warning: ${w}\n`);
        if (o.json) printJson(env.io, r);
        else {
          for (const p of r.written) env.io.out(`wrote ${p}\n`);
          if (r.enabled.length) env.io.out(`enabled ${r.enabled.join(', ')}\n`);
        }
      }),
    );
}
