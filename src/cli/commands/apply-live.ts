import type { Command } from 'commander';
import { action, common, xattrOption, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';
import { formatMerge } from '../format.js';
import { parseCommand } from '../../util/run-command.js';

export function applyLiveCommand(program: Command, env: CliEnv): void {
  xattrOption(common(program.command('apply-live')))
    .description('make the staged deployment active without a reboot, when its activation decision is live (a reboot decision: exit 3, nothing changed)')
    .option('--discard-on-failure', 'when an action fails (the apply is undone), discard the deployment instead of leaving it staged for a reboot')
    .option('--systemctl <command>', 'the service manager command the actions run through (default: systemctl)')
    .action(
      action(env, async (o: CommonOptions & { discardOnFailure?: boolean; systemctl?: string }) => {
        const s = await openSysroot(env, o);
        const services = o.systemctl === undefined ? undefined : { command: (({ file, args }) => [file, ...args])(parseCommand(o.systemctl, 'systemctl')) };
        const r = await s.applyLive({ discardOnFailure: o.discardOnFailure, services, onStep: o.json ? undefined : (step) => env.io.err(`apply-live: ${step}\n`) });
        if (o.json) return printJson(env.io, r);
        env.io.out(`applied live: deployment ${r.id} is current and runs in deployment ${r.running}'s root (${r.paths.length} path${r.paths.length === 1 ? '' : 's'} written, ${r.actions.map((a) => a.type).join(', ') || 'no action'}); the next boot runs it\n`);
        env.io.out(formatMerge(s.status().lastMerge!).join('\n') + '\n');
      }),
    );
}
