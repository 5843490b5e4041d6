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

/** How long the connection and Subscribe may take before systemctl is used instead. */
const CONNECT_TIMEOUT_MS = 10_000;

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
  /** The connection (being) opened; null before the first step or after it was lost. */
  private manager: Promise<SystemdManager | null> | null = null;
  private busGone: boolean;
  private closed = false;

  constructor(private readonly m: ServiceManager) {
    this.busGone = m.bus === undefined;
  }

  private get timeoutMs(): number {
    return this.m.timeoutMs ?? 120_000;
  }

  /** Starts connecting now (the handshake runs while the caller's own work awaits); the first step waits for it. */
  prepare(): void {
    if (!this.busGone && this.manager === null) this.manager = this.open();
  }

  async run(args: readonly string[]): Promise<ActionResult> {
    const timeoutMs = this.timeoutMs;
    const mgr = await this.connect();
    if (mgr === null) {
      const r = await systemctl(this.m, args);
      return { ok: r.ok, display: `systemctl ${args.join(' ')}`, exitCode: r.exitCode, notRunnable: r.notRunnable, output: r.output };
    }
    const [verb, unit] = args;
    const display = [BUS_NAMES[verb!] ?? verb, ...args.slice(1)].join(' ');
    const r = verb === 'daemon-reload' ? await mgr.daemonReload(timeoutMs) : await mgr.unitJob(verb as 'reload' | 'restart', unit!, timeoutMs);
    return { ok: r.ok, display, exitCode: null, notRunnable: null, output: r.output };
  }

  /** Closes the connection, or the one still being opened when it is (the runner's last step is done). */
  close(): void {
    this.closed = true;
    void this.manager?.then((mgr) => mgr?.close());
    this.manager = null;
  }

  private async connect(): Promise<SystemdManager | null> {
    if (this.busGone) return null;
    const mgr = this.manager === null ? null : await this.manager;
    if (mgr !== null && mgr.bus.closedBy === null) return mgr;
    if (this.busGone) return null;
    this.manager = this.open();
    return this.manager;
  }

  /** A connection, or null (and systemctl from here on) when none can be made: nothing was sent but the handshake and Subscribe. */
  private open(): Promise<SystemdManager | null> {
    return SystemdManager.open(this.m.bus!, Math.min(this.timeoutMs, CONNECT_TIMEOUT_MS)).then(
      (mgr) => {
        if (!this.closed) return mgr;
        mgr.close();
        return null;
      },
      () => {
        this.busGone = true;
        return null;
      },
    );
  }
}
