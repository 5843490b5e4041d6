import type { Command } from 'commander';
import { statPath } from '../../fs/core/host-paths.js';
import { Sysroot } from '../../sysroot.js';
import type { BootLoader } from '../../boot/entries/sync.js';
import { sourceFromPath } from '../../sources/detect.js';
import { action, collect, common, xattrOption, nonNegativeInt, sysrootDir, waitSeconds, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function initCommand(program: Command, env: CliEnv): void {
  xattrOption(common(program.command('init')))
    .description('create a sysroot with a first deployment (empty, or from a directory or source) that is current, booted and good')
    .option('--from <source>', 'a directory to copy, or an update source to apply over an empty tree')
    .option('--label <label>', 'a label for the first deployment')
    .option('--boot-tries <n>', 'boot tries a new deployment gets before automatic rollback (default 3)')
    .option('--shared <dir>', 'a shared directory (machine state in no deployment, never rolled back); repeatable; default: var', collect, [])
    .option('--merged <dir>', 'a directory whose local changes finalize carries into the new deployment; repeatable; default: etc', collect, [])
    .option('--boot-dir <dir>', 'write boot entries here, each naming its deployment: /boot (bls), the ESP (systemd-boot) or GRUB\'s directory /boot/grub (grub)')
    .option('--boot-loader <kind>', 'the form of the entries: bls (GRUB with blscfg; default), systemd-boot, grub (GRUB without blscfg: Debian, Ubuntu)')
    .option('--kernel-argument <arg>', 'a kernel argument of the first deployment (repeatable; later deployments inherit them)', collect, [] as string[])
    .option('--trusted-key <file>', 'a minisign/signify public key; with one, every stage needs a valid signature (repeatable)', collect, [] as string[])
    .action(
      action(env, async (o: CommonOptions & { from?: string; label?: string; bootTries?: string; shared: string[]; merged: string[]; trustedKey: string[]; bootDir?: string; bootLoader?: string; kernelArgument: string[] }) => {
        const isDir = o.from !== undefined && statSafe(o.from);
        const s = await Sysroot.init(sysrootDir(env, o), {
          fromDirectory: isDir ? o.from : undefined,
          source: o.from !== undefined && !isDir ? sourceFromPath(o.from) : undefined,
          label: o.label,
          bootTries: nonNegativeInt('boot-tries', o.bootTries),
          shared: o.shared.length ? o.shared : undefined,
          merged: o.merged.length ? o.merged : undefined,
          bootDir: o.bootDir,
          bootLoader: o.bootLoader as BootLoader | undefined,
          kernelArguments: o.kernelArgument,
          trustedKeys: o.trustedKey,
          waitSeconds: waitSeconds(o),
          faults: env.faults,
          onWarning: (m) => env.io.err(`stagedroot: warning: ${m}\n`),
          xattrPolicy: o.dropUnsupportedXattrs ? 'drop' : 'strict',
        });
        const st = s.status();
        if (o.json) printJson(env.io, st);
        else {
          env.io.out(`initialized ${st.sysroot} with deployment ${st.current} (${st.deployments[0]?.label})\n`);
          for (const [rel, host] of Object.entries(st.shared)) env.io.out(`shared /${rel}: ${host}\n`);
        }
      }),
    );
}

function statSafe(p: string): boolean {
  return statPath(p)?.isDirectory() ?? false;
}
