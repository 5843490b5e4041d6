import type { Status } from '../state/status.js';
import { FleetLockClient, FleetLockError } from '../fleetlock/client.js';
import { readFleetLockConfig, type FleetLockConfig } from '../fleetlock/config.js';
import { Sysroot, type SysrootOptions } from '../sysroot.js';

/** What `stagedroot reboot` decided. */
export type RebootOutcome =
  /** Nothing waits for a reboot: no slot taken, no reboot. */
  | { action: 'nothing-staged' }
  /** The slot is held (or no FleetLock is configured) and the reboot was started. */
  | { action: 'rebooted'; slot: boolean; attempts: number }
  /** No slot: the deployment stays staged, nothing changed. `error` says why (its kind: the server's). */
  | { action: 'no-slot'; waiting: string; error: FleetLockError; attempts: number };

export interface RebootOptions {
  /** The lock server (null: reboot without coordination). */
  fleetLock: FleetLockConfig | null;
  /** Starts the reboot (`systemctl reboot`); called only once the slot is held. */
  reboot: () => Promise<void>;
  /** How long to keep asking for a slot (default 0: ask once). */
  waitMs?: number;
  /** Pause between two asks (default 10 s; bounded by what is left of waitMs). */
  retryMs?: number;
  /** Per-request time limit (default: the config's, else 30 s). */
  timeoutMs?: number;
  /** Called after each refused ask (the CLI prints it). */
  onRefused?: (err: FleetLockError, attempt: number) => void;
  /** For tests: the clock and the pause. */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * The reboot that activates a staged (or finalized) deployment, taking a FleetLock reboot
 * slot first (Zincati's pre-reboot state): asks `POST /v1/pre-reboot` until the slot is
 * held or `waitMs` is spent (a bounded loop), then reboots. A slot that cannot be had
 * leaves everything as it was: the deployment stays staged and the outcome says so.
 * Taking the slot is recursive, so asking again after a failed reboot is harmless.
 */
export async function rebootWithSlot(status: Status, o: RebootOptions): Promise<RebootOutcome> {
  const waiting = status.staged ?? (status.pendingReboot ? status.current : null);
  if (waiting === null) return { action: 'nothing-staged' };
  if (o.fleetLock === null) {
    await o.reboot();
    return { action: 'rebooted', slot: false, attempts: 0 };
  }
  const client = new FleetLockClient(o.fleetLock, o.timeoutMs === undefined ? {} : { timeoutMs: o.timeoutMs });
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const deadline = now() + (o.waitMs ?? 0);
  const retryMs = Math.max(1, o.retryMs ?? 10_000);
  // At most one ask per retry period within the wait, plus the first: bounded even with a clock that stands still.
  const maxAttempts = 1 + Math.ceil((o.waitMs ?? 0) / retryMs);
  for (let attempt = 1; ; attempt++) {
    try {
      await client.preReboot();
    } catch (err) {
      if (!(err instanceof FleetLockError)) throw err;
      o.onRefused?.(err, attempt);
      const left = deadline - now();
      if (left <= 0 || attempt >= maxAttempts) return { action: 'no-slot', waiting, error: err, attempts: attempt };
      await sleep(Math.min(retryMs, left));
      continue;
    }
    await o.reboot();
    return { action: 'rebooted', slot: true, attempts: attempt };
  }
}

/**
 * Releases this node's reboot slot (`POST /v1/steady-state`, Zincati's steady state),
 * once `health` marked the booted deployment good. Releasing a slot not held succeeds
 * (the protocol's UnlockIfHeld), so it is safe on every good boot.
 */
export async function releaseSlot(config: FleetLockConfig, o: { timeoutMs?: number } = {}): Promise<void> {
  await new FleetLockClient(config, o).steadyState();
}

/**
 * Configures FleetLock for a sysroot once (SYSROOT/fleetlock.json): the settings checked,
 * then written durably as every writer writes (Sysroot.configureFleetLock: the lock, so
 * BUSY while another writer holds it unless `waitSeconds`, and recovery first).
 */
export async function configureFleetLock(sysroot: string, config: FleetLockConfig, o: SysrootOptions = {}): Promise<FleetLockConfig> {
  return (await Sysroot.open(sysroot, o)).configureFleetLock(config);
}

/** The sysroot's FleetLock settings, or null when it has none (reboots are then not coordinated). */
export function fleetLockOf(sysroot: string): FleetLockConfig | null {
  return readFleetLockConfig(sysroot);
}
