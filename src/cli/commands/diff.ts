import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { formatDiff } from '../format.js';
import { printJson } from '../io.js';

export function diffCommand(program: Command, env: CliEnv): void {
  common(program.command('diff'))
    .description('changed paths between two deployments (A added, D removed, M modified), by manifest')
    .argument('<a>', 'deployment id')
    .argument('<b>', 'deployment id')
    .action(
      action(env, async (a: string, b: string, o: CommonOptions) => {
        const changes = await (await openSysroot(env, o)).diff(a, b);
        if (o.json) printJson(env.io, { from: a, to: b, changes });
        else env.io.out(formatDiff(changes));
      }),
    );
}
