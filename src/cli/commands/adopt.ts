import * as path from 'node:path';
import type { Command } from 'commander';
import { adoptRoot } from '../../install/adopt.js';
import type { BootLoader } from '../../boot/entries/sync.js';
import type { CopyProgress } from '../../fs/trees/copy-tree.js';
import { action, collect, common, nonNegativeInt, waitSeconds, type CliEnv, type CommonOptions } from '../common.js';
import { printJson, type Io } from '../io.js';

interface AdoptCliOptions extends CommonOptions {
  root: string;
  label?: string;
  shared: string[];
  bootTries?: string;
  bootDir?: string;
  bootLoader?: string;
  kernelArgument: string[];
}

/** Progress on stderr: a bar on a terminal, else a line every 5 seconds (an adoption takes minutes). */
function adoptProgress(io: Io): { update: (p: CopyProgress) => void; done: () => void } {
  let last = Date.now();
  let drawn = false;
  const line = (p: CopyProgress): string => `adopt: ${p.done} entries, ${(p.bytes / 1e6).toFixed(1)} MB linked or copied`;
  return {
    update(p) {
      const now = Date.now();
      if (now - last < (io.errIsTty ? 100 : 5000)) return;
      last = now;
      io.err(io.errIsTty ? `\r${line(p)}\x1b[K` : `stagedroot: ${line(p)}\n`);
      drawn = io.errIsTty;
    },
    done() {
      if (drawn) io.err('\r\x1b[K');
    },
  };
}

export function adoptCommand(program: Command, env: CliEnv): void {
  common(program.command('adopt'))
    .description('adopt the running root in place: a sysroot on its filesystem (default /stagedroot) whose first deployment is this root, hardlinked (etc/ copied); the machine boots as before until the kernel argument stagedroot=PATH is set')
    .option('--root <dir>', 'the root to adopt', '/')
    .option('--label <label>', 'a label for the first deployment', 'adopted')
    .option('--shared <dir>', 'a shared directory (never rolled back); repeatable; default: var, home, root, srv', collect, [] as string[])
    .option('--boot-tries <n>', 'boot tries a new deployment gets before automatic rollback (default 3)')
    .option('--boot-dir <dir>', 'write boot entries here for the deployments that ship a kernel (as init --boot-dir): /boot/grub (grub), the ESP (systemd-boot), /boot (bls)')
    .option('--boot-loader <kind>', 'the form of the entries (as init --boot-loader): grub (Debian\'s GRUB, without blscfg), systemd-boot, bls (default)')
    .option('--kernel-argument <arg>', 'with --boot-dir: a kernel argument of the first deployment (repeatable; default: this boot\'s /proc/cmdline plus stagedroot=SYSROOT)', collect, [] as string[])
    .addHelpText('after', '\nThen: `stagedroot install` (units, initramfs step), rebuild the initramfs, and add stagedroot=/stagedroot to the kernel command line (docs/install.md).')
    .action(
      action(env, async (o: AdoptCliOptions) => {
        const root = path.resolve(o.root);
        const progress = adoptProgress(env.io);
        let r;
        try {
          r = await adoptRoot({
            root,
            sysroot: o.sysroot ?? (env.io.env.STAGEDROOT_SYSROOT || undefined),
            label: o.label,
            shared: o.shared.length ? o.shared : undefined,
            bootTries: nonNegativeInt('boot-tries', o.bootTries),
            ...(o.bootDir === undefined ? {} : { bootDir: o.bootDir }),
            ...(o.bootLoader === undefined ? {} : { bootLoader: o.bootLoader as BootLoader }),
            ...(o.kernelArgument.length ? { kernelArguments: o.kernelArgument } : {}),
            waitSeconds: waitSeconds(o),
            faults: env.faults,
            onWarning: (m) => env.io.err(`stagedroot: warning: ${m}\n`),
            xattrPolicy: o.dropUnsupportedXattrs ? 'drop' : 'strict',
            onProgress: progress.update,
          });
        } finally {
          progress.done();
        }
        if (o.json) printJson(env.io, r);
        else {
          env.io.out(r.alreadyAdopted ? `${r.root} is adopted already: sysroot ${r.sysroot}, first deployment ${r.id}\n` : `adopted ${r.root} into ${r.sysroot}: deployment ${r.id} (${r.entries} entries)\n`);
          env.io.out(`shared (never rolled back): ${r.shared.map((d) => `/${d}`).join(' ')}\n`);
          if (r.hollow.length) env.io.out(`left empty (mount points and runtime directories): ${r.hollow.map((d) => `/${d}`).join(' ')}\n`);
          if (r.packageDbs.length) env.io.out(`package databases per deployment: ${r.packageDbs.map((d) => `/${d}`).join(' ')} now link to /usr/lib/sysimage/\n`);
          env.io.out(`wrote ${r.environmentFile}\nthis machine boots as before until its kernel command line has stagedroot=/${path.relative(r.root, r.sysroot)} (docs/install.md)\n`);
        }
      }),
    );
}
