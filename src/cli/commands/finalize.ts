import type { Command } from 'commander';
import { action, common, xattrOption, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';
import { formatMerge } from '../format.js';
import { mergeStatus } from '../../state/status.js';

export function finalizeCommand(program: Command, env: CliEnv): void {
  xattrOption(common(program.command('finalize')))
    .description('the shutdown hook: make the staged deployment current (nothing staged: exit 0)')
    .option('--full-verify', 'verify the whole staged tree, not only what the update changed')
    .action(
      action(env, async (o: CommonOptions & { fullVerify?: boolean }) => {
        const s = await openSysroot(env, o);
        const r = await s.finalize({ fullVerify: o.fullVerify });
        if (o.json) printJson(env.io, r);
        else if (r.finalized) {
          env.io.out(`finalized: deployment ${r.id} is current (was ${r.previous}); it boots next\n`);
          env.io.out(formatMerge(mergeStatus(r.merge, s.path)).join('\n') + '\n');
        }
        else if (r.reason === 'locked') env.io.out(`deployment ${r.id} is staged but finalization-locked; nothing changed (run \`stagedroot unlock\`)\n`);
        else env.io.out('nothing staged; nothing to finalize\n');
      }),
    );
}
