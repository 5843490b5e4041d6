import type { Command } from 'commander';
import { bootcHost } from '../../agent/bootc-host.js';
import { machineConfigNodeStatus } from '../../agent/machine-config-node.js';
import { StagedrootError } from '../../errors.js';
import type { Status } from '../../state/status.js';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { formatStatus } from '../format.js';
import { printJson } from '../io.js';

interface StatusCliOptions extends CommonOptions {
  format?: string;
  desiredConfig?: string;
}

const FORMATS = ['text', 'json', 'machine-config-node', 'bootc'] as const;

/** The config a node should run when the caller does not say: the staged or current deployment's, else the booted one's. */
function defaultDesired(s: Status): string {
  const d = s.deployments.find((x) => x.staged) ?? s.deployments.find((x) => x.current) ?? s.deployments.find((x) => x.booted);
  return d?.label ?? '';
}

export function statusCommand(program: Command, env: CliEnv): void {
  common(program.command('status'))
    .description('show the deployments and what is booted, current, staged and rollback')
    .option('--format <format>', `text, json (as --json), machine-config-node (a MachineConfigNode status) or bootc (a BootcHost document)`)
    .option('--desired-config <name>', 'for machine-config-node: the rendered config the node should run (default: the staged or current deployment\'s label)')
    .action(
      action(env, async (o: StatusCliOptions) => {
        const format = o.format ?? (o.json ? 'json' : 'text');
        if (!(FORMATS as readonly string[]).includes(format)) {
          throw new StagedrootError('USAGE', `Expected --format to be one of ${FORMATS.join(', ')}, got ${JSON.stringify(format)}`, { option: 'format', value: format });
        }
        const s = await openSysroot(env, o);
        const st = s.status();
        if (format === 'machine-config-node') printJson(env.io, machineConfigNodeStatus(st, o.desiredConfig ?? defaultDesired(st)));
        else if (format === 'bootc') printJson(env.io, bootcHost(st));
        else if (format === 'json') printJson(env.io, st);
        else env.io.out(formatStatus(st));
      }),
    );
}
