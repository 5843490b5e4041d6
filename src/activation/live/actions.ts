import type { PolicyAction } from '../../state/activation.js';
import { spawnSync } from 'node:child_process';
import { readText } from '../../fs/core/host-paths.js';
import type { LiveJournal } from './journal.js';
import { runCommand, type CommandResult, type CommandSpec } from '../../util/run-command.js';
import { openCaptureFile } from '../../fs/output/capture-file.js';

/*
 * What each policy action runs on the running system, as the MCO's
 * performPostConfigChangeNodeDisruptionAction does it (pkg/daemon/update.go): Reload and
 * Restart are `systemctl reload|restart UNIT`, DaemonReload `systemctl daemon-reload`,
 * Special (registries.conf) a reload of crio.service. None has nothing to run; Drain is
 * the agent's, before the apply (its loop drains when the decision says so); Reboot never
 * reaches here (a decision with a Reboot is not live). systemctl waits for each job's
 * result (no --no-block), so a unit that fails to reload fails its action.
 */

/** The systemctl arguments of an action, or null when it runs nothing here. */
export function systemctlArgs(a: PolicyAction): string[] | null {
  switch (a.type) {
    case 'Reload':
      return ['reload', a.reload.serviceName];
    case 'Restart':
      return ['restart', a.restart.serviceName];
    case 'DaemonReload':
      return ['daemon-reload'];
    case 'Special':
      return ['reload', 'crio.service'];
    default:
      return null;
  }
}

/** How an action is shown in progress lines: its type and unit (it runs over systemd's bus or as systemctl: the runner decides). */
export function actionText(a: PolicyAction): string {
  const args = systemctlArgs(a);
  if (args === null || a.type === 'DaemonReload') return a.type;
  return a.type === 'Special' ? `Special (${args.join(' ')})` : `${a.type} ${args[1]}`;
}

/**
 * The service manager the actions talk to: on a host, systemd over its private socket
 * (src/systemd/bus/, run by run-actions.ts), `systemctl` where that socket cannot be
 * reached; a test passes its own command (and no socket: the command alone).
 */
export interface ServiceManager {
  /** The command and leading arguments (default ["systemctl"]). */
  command: readonly string[];
  /** systemd's private D-Bus socket, tried first by apply-live (recovery always runs the command). */
  bus?: string;
  /** How long one action may take (default 120 s). */
  timeoutMs?: number;
}

export const HOST_SYSTEMCTL: ServiceManager = { command: ['systemctl'], bus: '/run/systemd/private' };

/**
 * Runs `systemctl ARGS` through the service manager; never rejects. Its output goes to a
 * capture file, not pipes (runCommand's `output`; pipes when the file cannot be made):
 * systemctl leaves no child behind that writes after it, and the sockets of a first
 * spawn's pipes cost apply-live's first action more than its own work under TCG.
 */
export function systemctl(m: ServiceManager, args: readonly string[]): Promise<CommandResult> {
  return runCommand(commandOf(m, args), { timeoutMs: m.timeoutMs ?? 120_000, output: openCaptureFile() ?? undefined });
}

/** `systemctl ARGS` as the service manager runs it: its command and leading arguments, then ARGS. */
function commandOf(m: ServiceManager, args: readonly string[]): CommandSpec {
  const [file, ...lead] = m.command as [string, ...string[]];
  return { file, args: [...lead, ...args], display: `systemctl ${args.join(' ')}` };
}

/** This boot's id (null where the kernel does not say: not Linux). */
export function currentBootId(): string | null {
  return readText('/proc/sys/kernel/random/boot_id')?.trim() ?? null;
}

/**
 * `systemctl ARGS`, synchronously: for recovery, which runs when a sysroot is opened
 * (synchronous by contract) and only after a crash cut a live apply short. Returns what failed, or null.
 */
export function systemctlSync(m: ServiceManager, args: readonly string[]): string | null {
  const c = commandOf(m, args);
  const r = spawnSync(c.file, c.args, { encoding: 'utf8', timeout: m.timeoutMs ?? 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.error) return `${c.display}: ${(r.error as NodeJS.ErrnoException).code ?? r.error.message}`;
  return r.status === 0 ? null : `${c.display}: exit ${r.status ?? r.signal}`;
}

/**
 * What an undo runs after the files are back: one daemon-reload when units were written,
 * then each service already actioned (the failing one included) restarted or reloaded
 * again, so that it runs the old configuration; duplicates once, in first-seen order.
 */
export function undoSteps(j: LiveJournal): string[][] {
  const done = j.progress.filesWritten ? Math.min(j.actions.length, j.progress.actionsDone + 1) : 0;
  const services = new Map<string, string[]>();
  for (const a of j.actions.slice(0, done)) {
    const args = systemctlArgs(a);
    if (args !== null && args[0] !== 'daemon-reload') services.set(args.join(' '), args);
  }
  return [...(j.daemonReload ? [['daemon-reload']] : []), ...services.values()];
}
