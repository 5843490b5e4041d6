import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { formatDrift } from '../format.js';
import { printJson } from '../io.js';

export function verifyCommand(program: Command, env: CliEnv): void {
  common(program.command('verify'))
    .description("check a deployment's tree (default: booted) against its manifest; exit 1 when it has drifted")
    .argument('[id]', 'deployment id')
    .action(
      action(env, async (id: string | undefined, o: CommonOptions) => {
        const r = await (await openSysroot(env, o)).verify(id);
        if (o.json) printJson(env.io, { id: r.id, ok: r.drift.length === 0, drift: r.drift });
        else env.io.out(formatDrift(r.id, r.drift));
        return r.drift.length === 0 ? 0 : 1;
      }),
    );
}
