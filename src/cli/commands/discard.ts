import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function discardCommand(program: Command, env: CliEnv): void {
  common(program.command('discard'))
    .description('drop the staged deployment')
    .action(
      action(env, async (o: CommonOptions) => {
        const r = await (await openSysroot(env, o)).discardStaged();
        if (o.json) printJson(env.io, r);
        else env.io.out(`discarded staged deployment ${r.removed}\n`);
      }),
    );
}
