import { BusClosed, BusConnection, BusMethodError, BusUnavailable } from './connection.js';
import type { BusMessage, Variant } from './wire.js';

/*
 * systemd's manager (org.freedesktop.systemd1.Manager) over a direct connection to its
 * private socket, as systemctl talks to it as root: Subscribe() once, then a unit's
 * ReloadUnit/RestartUnit in mode "replace", whose reply is the job's object path, and that
 * job's JobRemoved(uoss) signal with its result; Reload() (daemon-reload), whose reply comes
 * once the reload is done. A job's failure is told as systemctl tells it ("Job for UNIT
 * failed because the control process exited with error code.").
 */

export const SYSTEMD_PRIVATE_SOCKET = '/run/systemd/private';
const DEST = 'org.freedesktop.systemd1';
const PATH = '/org/freedesktop/systemd1';
const MANAGER = 'org.freedesktop.systemd1.Manager';

/** What became of one call: ok, or what failed, in systemctl's words. */
export interface JobOutcome {
  ok: boolean;
  output: string;
  timedOut: boolean;
}

/** systemctl's explanations of a service's Result (src/systemctl/systemctl-util.c, log_job_error_with_service_result). */
const EXPLANATIONS: Record<string, string> = {
  resources: 'of unavailable resources or another system error',
  protocol: 'the service did not take the steps required by its unit configuration',
  timeout: 'a timeout was exceeded',
  'exit-code': 'the control process exited with error code',
  signal: 'a fatal signal was delivered to the control process',
  'core-dump': 'a fatal signal was delivered causing the control process to dump core',
  watchdog: 'the service failed to send watchdog ping',
  'start-limit': 'start of the service was attempted too often',
};

/** systemctl's words for a job result other than done (src/systemctl/systemctl-util.c, check_wait_response). */
function jobResultText(unit: string, result: string): string | null {
  switch (result) {
    case 'done':
      return null;
    case 'canceled':
      return `Job for ${unit} canceled.`;
    case 'timeout':
      return `Job for ${unit} timed out.`;
    case 'dependency':
      return `A dependency job for ${unit} failed. See 'journalctl -xe' for details.`;
    case 'invalid':
      return `${unit} is not active, cannot reload.`;
    case 'assert':
      return `Assertion failed on job for ${unit}.`;
    case 'unsupported':
      return `Operation on or unit type of ${unit} not supported on this system.`;
    case 'collected':
      return `Queued job for ${unit} was garbage collected.`;
    case 'once':
      return `Unit ${unit} was started already once and can't be started again.`;
    case 'skipped':
      return `Job for ${unit} was skipped.`;
    default:
      return `Job for ${unit} failed.`;
  }
}

/** A unit's object path (systemd's bus_label_escape: every byte but [A-Za-z0-9], and a leading digit, as _XX). */
export function unitObjectPath(unit: string): string {
  let out = '';
  const bytes = Buffer.from(unit, 'utf8');
  bytes.forEach((b, i) => {
    const alpha = (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a);
    const digit = b >= 0x30 && b <= 0x39;
    out += alpha || (digit && i > 0) ? String.fromCharCode(b) : `_${b.toString(16).padStart(2, '0')}`;
  });
  return `${PATH}/unit/${out === '' ? '_' : out}`;
}

export class SystemdManager {
  /** JobRemoved results of jobs whose call has not been answered yet (a signal can come first), by job path. */
  private readonly removed = new Map<string, { unit: string; result: string }>();
  private readonly waiting = new Map<string, (r: { unit: string; result: string }) => void>();

  private constructor(readonly bus: BusConnection) {
    bus.onSignal({ interface: MANAGER, member: 'JobRemoved' }, (m) => this.onSignal(m));
  }

  /** Connects and subscribes; BusUnavailable when that fails (no action was sent: the caller may use systemctl instead). */
  static async open(socket: string, timeoutMs: number): Promise<SystemdManager> {
    const bus = await BusConnection.open(socket, { timeoutMs });
    const m = new SystemdManager(bus);
    try {
      await withTimeout(bus.call({ destination: DEST, path: PATH, interface: MANAGER, member: 'Subscribe' }), timeoutMs, bus);
    } catch (e) {
      bus.close();
      throw new BusUnavailable(`systemd's Subscribe failed: ${(e as Error).message}`);
    }
    return m;
  }

  close(): void {
    this.bus.close();
  }

  /**
   * `systemctl reload|restart UNIT`: the job queued in mode "replace", its result waited for.
   * Never rejects: a method error, a failed job, the connection lost or the time up is its
   * outcome (the call was sent: it is never made again).
   */
  unitJob(verb: 'reload' | 'restart', unit: string, timeoutMs: number): Promise<JobOutcome> {
    const member = verb === 'reload' ? 'ReloadUnit' : 'RestartUnit';
    const job = (async (): Promise<JobOutcome> => {
      const reply = await this.bus.call({ destination: DEST, path: PATH, interface: MANAGER, member, signature: 'ss', body: [unit, 'replace'] });
      const path = reply.body[0];
      if (typeof path !== 'string') throw new BusClosed(`${member} answered without a job path (signature "${reply.signature}")`);
      const r = await this.jobRemoved(path);
      const failed = jobResultText(r.unit || unit, r.result);
      if (failed === null) return { ok: true, output: '', timedOut: false };
      return { ok: false, output: r.result === 'failed' ? await this.explainFailure(r.unit || unit, failed) : failed, timedOut: false };
    })();
    return settle(job, timeoutMs, this.bus, (e) => (e instanceof BusMethodError ? `Failed to ${verb} ${unit}: ${e.message}` : `${member} ${unit}: ${e.message}`));
  }

  /** `systemctl daemon-reload`: Reload(), answered once the reload is done. Never rejects. */
  daemonReload(timeoutMs: number): Promise<JobOutcome> {
    const call = this.bus.call({ destination: DEST, path: PATH, interface: MANAGER, member: 'Reload' }).then(() => ({ ok: true, output: '', timedOut: false }));
    return settle(call, timeoutMs, this.bus, (e) => `Failed to reload daemon: ${e.message}`);
  }

  private jobRemoved(path: string): Promise<{ unit: string; result: string }> {
    const seen = this.removed.get(path);
    if (seen) {
      this.removed.delete(path);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      this.waiting.set(path, resolve);
      this.bus.onClose(reject);
    });
  }

  private onSignal(m: BusMessage): void {
    if (m.interface !== MANAGER || m.member !== 'JobRemoved' || m.signature !== 'uoss') return;
    const [, path, unit, result] = m.body as [number, string, string, string];
    const r = { unit, result };
    const w = this.waiting.get(path);
    if (w) {
      this.waiting.delete(path);
      w(r);
    } else {
      // Another client's job, or ours before its reply: kept a little while (bounded).
      this.removed.set(path, r);
      if (this.removed.size > 256) this.removed.delete(this.removed.keys().next().value!);
    }
  }

  /** systemctl's "because …" from a failed service's Result, when systemd says it. */
  private async explainFailure(unit: string, text: string): Promise<string> {
    if (!unit.endsWith('.service')) return text;
    try {
      const reply = await this.bus.call({ destination: DEST, path: unitObjectPath(unit), interface: 'org.freedesktop.DBus.Properties', member: 'Get', signature: 'ss', body: ['org.freedesktop.systemd1.Service', 'Result'] });
      const v = reply.body[0] as Variant | undefined;
      const why = typeof v?.value === 'string' ? EXPLANATIONS[v.value] : undefined;
      return why === undefined ? text : `Job for ${unit} failed because ${why}.`;
    } catch {
      return text;
    }
  }
}

class TimedOut extends Error {}

function withTimeout<T>(p: Promise<T>, ms: number, bus: BusConnection): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimedOut(`no answer from systemd in ${ms / 1000} s`)), ms);
    bus.onClose(() => clearTimeout(timer));
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

function settle(p: Promise<JobOutcome>, ms: number, bus: BusConnection, describe: (e: Error) => string): Promise<JobOutcome> {
  return withTimeout(p, ms, bus).catch((e: unknown) => {
    const err = e instanceof Error ? e : new Error(String(e));
    return { ok: false, output: describe(err), timedOut: err instanceof TimedOut };
  });
}
