import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function markCommands(program: Command, env: CliEnv): void {
  common(program.command('mark-good'))
    .description('boot assessment passed: the booted deployment is good')
    .action(
      action(env, async (o: CommonOptions) => {
        const st = await (await openSysroot(env, o)).markGood();
        if (o.json) printJson(env.io, st);
        else env.io.out(`deployment ${st.booted} marked good\n`);
      }),
    );
  common(program.command('mark-bad'))
    .description('boot assessment failed: mark the booted deployment bad; current goes back to the last good one')
    .option('--reason <text>', 'why (kept in status.lastFailure)', 'marked bad')
    .action(
      action(env, async (o: CommonOptions & { reason: string }) => {
        const st = await (await openSysroot(env, o)).markBad(o.reason);
        if (o.json) printJson(env.io, st);
        else env.io.out(`deployment ${st.booted} marked bad (${o.reason}); deployment ${st.current} boots next\n`);
      }),
    );
}
