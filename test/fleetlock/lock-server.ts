import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ServerMode = 'ok' | 'silent' | 'refusing' | 'html-error';

/**
 * A FleetLock server on 127.0.0.1 with the protocol's semantics (as airlock implements
 * them): per group a counting semaphore of `slots` with owners; pre-reboot is a recursive
 * lock (an owner asking again keeps its one slot), steady-state unlocks if held (and
 * succeeds when not held); requests without `fleet-lock-protocol: true` or with a bad
 * body are rejected with a JSON `{kind, value}` error. Modes: `silent` never answers (the
 * request stays open until the client hangs up, counted in `hungUp`), `refusing` answers 500 with a JSON error, `html-error` 502 with no JSON.
 */
export class LockServer {
  readonly holders = new Map<string, Set<string>>();
  readonly requests: { path: string; header: string | undefined; body: string }[] = [];
  mode: ServerMode = 'ok';
  /** Requests whose client closed the connection before any answer. */
  hungUp = 0;
  private server: http.Server | null = null;
  private readonly open = new Set<import('node:net').Socket>();

  constructor(readonly slots = 1) {}

  get url(): string {
    const a = this.server!.address() as AddressInfo;
    return `http://127.0.0.1:${a.port}/fleetlock`;
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.on('connection', (s) => {
      this.open.add(s);
      s.on('close', () => this.open.delete(s));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return this;
  }

  async stop(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.server = null;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let body = '';
    for await (const c of req) body += c;
    this.requests.push({ path: req.url ?? '', header: req.headers['fleet-lock-protocol'] as string | undefined, body });
    const reply = (code: number, payload?: { kind: string; value: string }): void => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(payload ? JSON.stringify(payload) : '');
    };
    if (this.mode === 'silent') {
      res.on('close', () => void (res.headersSent || this.hungUp++));
      return;
    }
    if (this.mode === 'refusing') return reply(500, { kind: 'failed_lock_unavailable', value: 'etcd is unreachable' });
    if (this.mode === 'html-error') {
      res.writeHead(502, { 'content-type': 'text/html' });
      return void res.end('<html>bad gateway</html>');
    }
    if (req.method !== 'POST') return reply(405, { kind: 'method_not_allowed', value: 'POST only' });
    if (req.headers['fleet-lock-protocol'] !== 'true') return reply(400, { kind: 'missing_fleet_lock_header', value: 'missing "fleet-lock-protocol: true" header' });
    let id: unknown;
    let group: unknown;
    try {
      ({ id, group } = (JSON.parse(body) as { client_params: { id: unknown; group: unknown } }).client_params);
    } catch {
      return reply(400, { kind: 'failed_parsing_body', value: 'the body is not a FleetLock request' });
    }
    if (typeof id !== 'string' || id === '' || typeof group !== 'string' || !/^[a-zA-Z0-9.-]+$/.test(group)) {
      return reply(400, { kind: 'invalid_client_params', value: 'client_params.id and client_params.group are required' });
    }
    const held = this.holders.get(group) ?? new Set<string>();
    this.holders.set(group, held);
    if (req.url === '/fleetlock/v1/pre-reboot') {
      if (held.has(id)) return reply(200); // recursive
      if (held.size >= this.slots) return reply(409, { kind: 'failed_lock_semaphore_full', value: 'semaphore currently full, all slots are locked already' });
      held.add(id);
      return reply(200);
    }
    if (req.url === '/fleetlock/v1/steady-state') {
      held.delete(id); // unlock if held
      return reply(200);
    }
    return reply(404, { kind: 'not_found', value: `no endpoint ${req.url}` });
  }
}
