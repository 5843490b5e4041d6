import { SystemdManager } from '../../systemd/bus/manager.js';
import { systemctl, type ServiceManager } from './actions.js';

/** What one action (or undo step) came to, from systemd's bus or from systemctl. */
export interface ActionResult {
  ok: boolean;
  /** The action as it was run: "RestartUnit x.service" on the bus, "systemctl restart x.service" spawned. */
  display: string;
  exitCode: number | null;
  /** The command could not be run (systemctl missing): the machine's trouble, not the action's. */
  notRunnable: string | null;
  output: string;
}

const BUS_NAMES: Record<string, string> = { reload: 'ReloadUnit', restart: 'RestartUnit', 'daemon-reload': 'Reload' };

/**
 * Runs a live apply's actions and undo steps (systemctl's arguments: reload|restart UNIT,
 * daemon-reload) through one service manager. With a bus socket (the host's), each goes to
 * systemd over one connection to it, opened at the first step and again after it was lost;
 * when a connection cannot be made or authenticated (no systemd, not root), that step and
 * the rest are spawned as `systemctl ARGS`. The fallback is decided before a step's call is
 * sent, never after: a call that was sent has its outcome (a failure, the connection
 * lost, the time up), and is not made again either way.
 */
export class ActionRunner {
  private manager: SystemdManager | null = null;
  private busGone: boolean;

  constructor(private readonly m: ServiceManager) {
    this.busGone = m.bus === undefined;
  }

  async run(args: readonly string[]): Promise<ActionResult> {
    const timeoutMs = this.m.timeoutMs ?? 120_000;
    const mgr = await this.connect(timeoutMs);
    if (mgr === null) {
      const r = await systemctl(this.m, args);
      return { ok: r.ok, display: `systemctl ${args.join(' ')}`, exitCode: r.exitCode, notRunnable: r.notRunnable, output: r.output };
    }
    const [verb, unit] = args;
    const display = [BUS_NAMES[verb!] ?? verb, ...args.slice(1)].join(' ');
    const r = verb === 'daemon-reload' ? await mgr.daemonReload(timeoutMs) : await mgr.unitJob(verb as 'reload' | 'restart', unit!, timeoutMs);
    return { ok: r.ok, display, exitCode: null, notRunnable: null, output: r.output };
  }

  /** Closes the connection (the runner's last step is done). */
  close(): void {
    this.manager?.close();
    this.manager = null;
  }

  private async connect(timeoutMs: number): Promise<SystemdManager | null> {
    if (this.busGone) return null;
    if (this.manager !== null && this.manager.bus.closedBy === null) return this.manager;
    try {
      this.manager = await SystemdManager.open(this.m.bus!, timeoutMs);
      return this.manager;
    } catch {
      // Nothing was sent but the handshake and Subscribe: systemctl from here on.
      this.busGone = true;
      this.manager = null;
      return null;
    }
  }
}
