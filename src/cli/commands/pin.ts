import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

export function pinCommands(program: Command, env: CliEnv): void {
  for (const [verb, pinned] of [['pin', true], ['unpin', false]] as const) {
    common(program.command(verb))
      .description(pinned ? 'protect a deployment from prune' : 'let prune remove a deployment again')
      .argument('<id>', 'deployment id')
      .action(
        action(env, async (id: string, o: CommonOptions) => {
          const st = await (await openSysroot(env, o)).pin(id, pinned);
          if (o.json) printJson(env.io, st);
          else env.io.out(`deployment ${id} ${pinned ? 'pinned' : 'unpinned'}\n`);
        }),
      );
  }
}
