import * as http from 'node:http';
import * as https from 'node:https';
import type { TlsMaterial } from './tls-files.js';

export interface HttpRequest {
  url: URL;
  method?: 'GET' | 'HEAD';
  headers?: Record<string, string>;
  /** For https: the CAs and the client certificate. */
  tls?: TlsMaterial;
  /** For https: the certificate is not verified (registries.conf's `insecure`). */
  insecure?: boolean;
  /** No bytes for this long (before or after the headers): the request fails with a StallError. */
  stallMs: number;
}

/** No bytes came for `stallMs`. */
export class StallError extends Error {
  constructor(readonly ms: number) {
    super(`no bytes for ${ms / 1000} s`);
    this.name = 'StallError';
  }
}

/** The TLS errors that a retry cannot fix (a certificate for another name, an unknown CA). */
export function isTlsError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code ?? '';
  return /^(ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_SSL_|HOSTNAME_MISMATCH)/.test(code) || /certificate/i.test((err as Error | null)?.message ?? '');
}

/**
 * One HTTP(S) request, its response once the headers are in (the body not read). No
 * agent keeps connections (each request its own: a cut connection cannot poison the
 * next). The socket's idle timeout is the stall timer: no bytes for `stallMs`, before
 * or during the body, destroys the request or the response with a StallError.
 */
export function send(r: HttpRequest): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const secure = r.url.protocol === 'https:';
    const o: https.RequestOptions = {
      method: r.method ?? 'GET',
      headers: { 'user-agent': 'stagedroot', ...r.headers },
      agent: false,
      ...(secure && r.tls ? { ca: r.tls.ca, ...(r.tls.cert ? { cert: r.tls.cert, key: r.tls.key } : {}) } : {}),
      ...(secure && r.insecure ? { rejectUnauthorized: false } : {}),
    };
    const req = (secure ? https : http).request(r.url, o, (res) => {
      res.setTimeout(r.stallMs, () => res.destroy(new StallError(r.stallMs)));
      resolve(res);
    });
    req.setTimeout(r.stallMs, () => req.destroy(new StallError(r.stallMs)));
    req.on('error', reject);
    req.end();
  });
}

/** Reads a whole (small) body, refusing past `max` bytes: `null` then. */
export async function readBody(res: http.IncomingMessage, max: number): Promise<Buffer | null> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of res as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > max) {
      res.destroy();
      return null;
    }
    parts.push(c);
  }
  return Buffer.concat(parts);
}

/** Throws the response away (its connection is not reused). */
export function drain(res: http.IncomingMessage): void {
  res.resume();
  res.on('error', () => {});
}

/**
 * The parameters of a `WWW-Authenticate` challenge: `Bearer realm="…",service="…",scope="…"`
 * or `Basic realm="…"` (RFC 7235's auth-param list, quoted or token values).
 */
export function parseChallenge(header: string | undefined): { scheme: string; params: Record<string, string> } | null {
  if (header === undefined) return null;
  const m = /^\s*([A-Za-z][\w-]*)\s*(.*)$/s.exec(header);
  if (!m) return null;
  const params: Record<string, string> = {};
  const re = /([\w-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?\s*/g;
  for (const p of m[2]!.matchAll(re)) params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3]!;
  return { scheme: m[1]!.toLowerCase(), params };
}

/** `Retry-After` in milliseconds (seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, now = Date.now()): number | undefined {
  if (header === undefined) return undefined;
  if (/^\s*\d+\s*$/.test(header)) return Number(header) * 1000;
  const t = Date.parse(header);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}
