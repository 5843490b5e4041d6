import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function unlockCommand(program: Command, env: CliEnv): void {
  common(program.command('unlock'))
    .description('release the finalization lock: the staged deployment is finalized at the next shutdown')
    .action(
      action(env, async (o: CommonOptions) => {
        const st = await (await openSysroot(env, o)).setFinalizationLock(false);
        if (o.json) printJson(env.io, st);
        else env.io.out(`deployment ${st.staged} unlocked; it is finalized at the next shutdown\n`);
      }),
    );
}
