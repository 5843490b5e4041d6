import { StagedrootError } from '../errors.js';
import type { FleetLockConfig } from './config.js';

/** Zincati's default: a request may take long (a server waiting on etcd); ours is shorter, and configurable. */
export const DEFAULT_FLEETLOCK_TIMEOUT_MS = 30_000;

/**
 * A failed FleetLock operation, its `kind` as Zincati reports it: the server's JSON error
 * kind (`failed_lock_semaphore_full`, ...), `generic_http_<code>` for an error without
 * one, `client_failed_request` when no answer came (down, refused, timed out).
 */
export class FleetLockError extends StagedrootError {
  constructor(
    readonly kind: string,
    /** The server's `value` (its human-friendly description), or what went wrong on this side. */
    readonly description: string,
    readonly statusCode: number | null,
    readonly endpoint: string,
    cause?: unknown,
  ) {
    super('FLEETLOCK_FAILED', `FleetLock ${endpoint} failed: ${statusCode === null ? 'client-side error' : `server-side error, code ${statusCode}`}: ${kind}: ${description}`, { path: endpoint, ...(cause === undefined ? {} : { cause }) });
  }
}

export type FleetLockEndpoint = 'v1/pre-reboot' | 'v1/steady-state';

export interface FleetLockClientOptions {
  /** Per request (default 30 s). */
  timeoutMs?: number;
}

/**
 * The FleetLock protocol (github.com/coreos/zincati docs/development/fleetlock/protocol.md):
 * a POST of `{"client_params":{"id","group"}}` with the header `fleet-lock-protocol: true`
 * to BASE/v1/pre-reboot (take a reboot slot; recursive: a holder taking it again gets it)
 * or BASE/v1/steady-state (release it if held). 200 is success; anything else fails,
 * with the server's `{"kind","value"}` when it sent one.
 */
export class FleetLockClient {
  private readonly base: URL;
  private readonly timeoutMs: number;

  constructor(
    private readonly config: FleetLockConfig,
    o: FleetLockClientOptions = {},
  ) {
    this.base = new URL(config.url.endsWith('/') ? config.url : `${config.url}/`);
    this.timeoutMs = o.timeoutMs ?? config.timeoutMs ?? DEFAULT_FLEETLOCK_TIMEOUT_MS;
  }

  /** Takes (or keeps) a reboot slot. */
  preReboot(): Promise<void> {
    return this.post('v1/pre-reboot');
  }

  /** Releases the reboot slot, if held. */
  steadyState(): Promise<void> {
    return this.post('v1/steady-state');
  }

  private async post(endpoint: FleetLockEndpoint): Promise<void> {
    const body = JSON.stringify({ client_params: { id: this.config.id, group: this.config.group } });
    let res: Response;
    try {
      res = await fetch(new URL(endpoint, this.base), {
        method: 'POST',
        headers: { 'fleet-lock-protocol': 'true', 'content-type': 'application/json' },
        body,
        redirect: 'error', // the header guards against redirection; a redirect is not followed
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      const why = e.name === 'TimeoutError' ? `no answer within ${this.timeoutMs} ms` : `${e.cause?.code ?? e.message}`;
      throw new FleetLockError('client_failed_request', `${new URL(endpoint, this.base).href}: ${why}`, null, endpoint, err);
    }
    if (res.status === 200) {
      await res.body?.cancel();
      return;
    }
    const text = await res.text().catch(() => '');
    const remote = parseRemoteError(text);
    if (remote) throw new FleetLockError(remote.kind, remote.value, res.status, endpoint);
    throw new FleetLockError(`generic_http_${res.status}`, '(unknown/generic server error)', res.status, endpoint);
  }
}

function parseRemoteError(text: string): { kind: string; value: string } | null {
  try {
    const v = JSON.parse(text) as { kind?: unknown; value?: unknown };
    if (typeof v.kind === 'string' && v.kind !== '' && typeof v.value === 'string') return { kind: v.kind.slice(0, 200), value: v.value.slice(0, 2000) };
  } catch {
    // not the protocol's JSON error
  }
  return null;
}
