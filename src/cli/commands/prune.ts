import type { Command } from 'commander';
import { action, common, nonNegativeInt, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function pruneCommand(program: Command, env: CliEnv): void {
  common(program.command('prune'))
    .description('remove old deployments that are not booted, current, staged, rollback, pinned or the last failure')
    .option('--keep <n>', 'keep the n newest deployments besides the protected ones', '3')
    .action(
      action(env, async (o: CommonOptions & { keep: string }) => {
        const r = await (await openSysroot(env, o)).prune({ keep: nonNegativeInt('keep', o.keep) });
        if (o.json) printJson(env.io, r);
        else env.io.out(r.removed.length ? `removed ${r.removed.join(', ')}\n` : 'nothing to prune\n');
      }),
    );
}
