import type { Command } from 'commander';
import { action, collect, common, xattrOption, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';
import { formatMerge } from '../format.js';
import { mergeStatus } from '../../state/status.js';
import { parseCommand } from '../../util/run-command.js';
import { DEFAULT_HEALTH_DIRS } from './health.js';

export function applyLiveCommand(program: Command, env: CliEnv): void {
  xattrOption(common(program.command('apply-live')))
    .description('make the staged deployment active without a reboot, when its activation decision is live (a reboot decision: exit 3, nothing changed)')
    .option('--discard-on-failure', 'when an action fails (the apply is undone), discard the deployment instead of leaving it staged for a reboot')
    .option('--disruption-policy <file>', 'a MachineConfiguration (YAML or JSON) whose node disruption policies, merged over the defaults, decide again (default: the decision stage recorded)')
    .option('--systemctl <command>', 'the service manager command the actions run through instead of systemd\'s private socket (default: the socket, else systemctl)')
    .option('--health', `after the actions, run the health checks \`stagedroot health\` runs (${DEFAULT_HEALTH_DIRS.required[0]}, ${DEFAULT_HEALTH_DIRS.wanted[0]}); a required one failing undoes the apply`)
    .option('--health-check <command>', 'a required health check to run after the actions (repeatable; implies --health)', collect, [])
    .action(
      action(env, async (o: CommonOptions & { discardOnFailure?: boolean; systemctl?: string; health?: boolean; healthCheck: string[]; disruptionPolicy?: string }) => {
        const s = await openSysroot(env, o);
        const services = o.systemctl === undefined ? undefined : { command: (({ file, args }) => [file, ...args])(parseCommand(o.systemctl, 'systemctl')) };
        const health = o.health || o.healthCheck.length > 0 ? { required: o.healthCheck, optionalDirs: DEFAULT_HEALTH_DIRS } : undefined;
        const r = await s.applyLive({ discardOnFailure: o.discardOnFailure, services, health, disruptionPolicy: o.disruptionPolicy, onStep: o.json ? undefined : (step) => env.io.err(`apply-live: ${step}\n`) });
        if (o.json) return printJson(env.io, r);
        env.io.out(`applied live: deployment ${r.id} is current and runs in deployment ${r.running}'s root (${r.paths.length} path${r.paths.length === 1 ? '' : 's'} written, ${r.actions.map((a) => a.type).join(', ') || 'no action'}); the next boot runs it\n`);
        // The merge report apply-live recorded as lastMerge (no second read of the state for it).
        env.io.out(formatMerge(mergeStatus(r.merge, s.path)).join('\n') + '\n');
      }),
    );
}
