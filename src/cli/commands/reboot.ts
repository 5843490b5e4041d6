import type { Command } from 'commander';
import { fleetLockOf, rebootWithSlot } from '../../agent/fleet-reboot.js';
import { StagedrootError } from '../../errors.js';
import { parseCommand, runCommand, describeOutcome } from '../../util/run-command.js';
import { action, common, nonNegativeInt, openSysroot, sysrootDir, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

interface RebootCliOptions extends CommonOptions {
  command: string;
  slotWait?: string;
  slotRetry?: string;
}

interface ConfigureCliOptions extends CommonOptions {
  url?: string;
  group?: string;
  id?: string;
  timeout?: string;
}

const REBOOT_TIMEOUT_MS = 5 * 60_000;

export function rebootCommand(program: Command, env: CliEnv): void {
  common(program.command('reboot'))
    .description('reboot into the staged deployment, taking a FleetLock reboot slot first when one is configured')
    .option('--command <command>', 'what starts the reboot', 'systemctl reboot')
    .option('--slot-wait <seconds>', 'keep asking for a reboot slot this long (default 0: ask once)')
    .option('--slot-retry <seconds>', 'pause between two asks (default 10)')
    .addHelpText('after', '\nExit 0: nothing staged, or the slot is held and the reboot started. Exit 1: no slot (the deployment stays staged) or the reboot command failed.')
    .action(
      action(env, async (o: RebootCliOptions) => {
        const s = await openSysroot(env, o);
        const cmd = parseCommand(o.command, 'command');
        const wait = nonNegativeInt('slot-wait', o.slotWait);
        const retry = nonNegativeInt('slot-retry', o.slotRetry);
        const r = await rebootWithSlot(s.status(), {
          fleetLock: fleetLockOf(sysrootDir(env, o)),
          ...(wait === undefined ? {} : { waitMs: wait * 1000 }),
          ...(retry === undefined ? {} : { retryMs: Math.max(1, retry) * 1000 }),
          onRefused: (e, n) => void (o.json ? undefined : env.io.err(`stagedroot: no reboot slot yet (ask ${n}): ${e.kind}: ${e.description}\n`)),
          reboot: async () => {
            const run = await runCommand(cmd, { timeoutMs: REBOOT_TIMEOUT_MS });
            if (!run.ok) throw new StagedrootError('IO', `The reboot command ${cmd.display} ${describeOutcome(run, REBOOT_TIMEOUT_MS)}; the reboot slot stays held (asking again keeps it)${run.output ? `:\n${run.output}` : ''}`, { option: 'command', value: o.command });
          },
        });
        if (o.json) printJson(env.io, r.action === 'no-slot' ? { ...r, error: { kind: r.error.kind, value: r.error.description, statusCode: r.error.statusCode } } : r);
        else if (r.action === 'nothing-staged') env.io.out('nothing waits for a reboot: not rebooting\n');
        else if (r.action === 'rebooted') env.io.out(`${r.slot ? 'reboot slot held; ' : ''}rebooting into deployment ${s.status().staged ?? s.status().current}\n`);
        else env.io.err(`stagedroot: no reboot slot (${r.error.kind}: ${r.error.description}); deployment ${r.waiting} stays staged\n`);
        return r.action === 'no-slot' ? 1 : 0;
      }),
    );

  common(program.command('fleetlock'))
    .description('reboot coordination across a fleet (the FleetLock protocol of Zincati, airlock, fleetlock): `fleetlock configure --url U --group G --id ID`, `fleetlock show`')
    .argument('<action>', 'configure or show')
    .option('--url <url>', 'configure: the FleetLock server\'s base URL')
    .option('--group <group>', 'configure: the reboot group (default "default")')
    .option('--id <id>', 'configure: this node\'s lock-holder id (node name or machine id)')
    .option('--timeout <seconds>', 'configure: time limit of each request (default 30)')
    .action(
      action(env, async (verb: string, o: ConfigureCliOptions) => {
        const dir = sysrootDir(env, o);
        if (verb === 'configure') {
          const timeout = nonNegativeInt('timeout', o.timeout);
          if (o.url === undefined || o.id === undefined) throw new StagedrootError('USAGE', '`fleetlock configure` needs --url and --id', { option: o.url === undefined ? 'url' : 'id' });
          const c = await (await openSysroot(env, o)).configureFleetLock({ url: o.url, group: o.group ?? 'default', id: o.id, ...(timeout === undefined ? {} : { timeoutMs: timeout * 1000 }) });
          if (o.json) printJson(env.io, c);
          else env.io.out(`FleetLock: ${c.url}, group ${c.group}, id ${c.id}\n`);
        } else if (verb === 'show') {
          const c = fleetLockOf(dir);
          if (o.json) printJson(env.io, c);
          else env.io.out(c ? `FleetLock: ${c.url}, group ${c.group}, id ${c.id}\n` : 'FleetLock is not configured: reboots are not coordinated\n');
        } else {
          throw new StagedrootError('USAGE', `Expected \`fleetlock configure\` or \`fleetlock show\`, got ${JSON.stringify(verb)}`, { option: 'action', value: verb });
        }
      }),
    );
}
