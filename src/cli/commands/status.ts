import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { formatStatus } from '../format.js';
import { printJson } from '../io.js';

export function statusCommand(program: Command, env: CliEnv): void {
  common(program.command('status'))
    .description('show the deployments and what is booted, current, staged and rollback')
    .action(
      action(env, async (o: CommonOptions) => {
        const s = await openSysroot(env, o, { readOnly: true });
        const st = s.status();
        if (o.json) printJson(env.io, st);
        else env.io.out(formatStatus(st));
      }),
    );
}
