import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function bootCommand(program: Command, env: CliEnv): void {
  common(program.command('boot'))
    .description('the early-boot hook: record the booted deployment, count tries, roll back when none are left')
    .action(
      action(env, async (o: CommonOptions) => {
        const s = await openSysroot(env, o);
        const r = await s.boot({ runDir: env.io.places?.runDir });
        if (o.json) printJson(env.io, r);
        else if (r.event.kind === 'booted') {
          env.io.out(`booted deployment ${r.event.id}${r.event.triesLeft !== null ? ` (${r.event.triesLeft} boot tries left before automatic rollback)` : ''}\n`);
        } else {
          env.io.out(`automatic rollback: ${r.event.reason}; booted ${r.event.to} instead\n`);
        }
        if (!o.json) for (const a of r.actions) env.io.out(`${a}\n`);
        if (r.finalizeFailure) {
          env.io.err(`stagedroot: the last finalize FAILED for deployment ${r.finalizeFailure.id} (${r.finalizeFailure.label}): ${r.finalizeFailure.reason}\n`);
          return 1;
        }
        return r.event.kind === 'fell-back' ? 1 : 0;
      }),
    );
}
