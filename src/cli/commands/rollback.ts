import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function rollbackCommand(program: Command, env: CliEnv): void {
  common(program.command('rollback'))
    .description('make the rollback deployment current at the next boot')
    .option('--discard-staged', 'also drop a staged deployment (otherwise rollback refuses while one is staged)')
    .action(
      action(env, async (o: CommonOptions & { discardStaged?: boolean }) => {
        const st = await (await openSysroot(env, o)).rollback({ discardStaged: o.discardStaged });
        if (o.json) printJson(env.io, st);
        else env.io.out(`rolled back: deployment ${st.current} boots next (booted: ${st.booted})\n`);
      }),
    );
}
