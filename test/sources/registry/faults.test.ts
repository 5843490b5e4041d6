/**
 * The registry client against a tiny in-process HTTP server that misbehaves on purpose:
 * redirects to another host, 429 and 503, a stall, a connection cut mid-blob, a 200
 * answer to a Range request, a blob longer than declared or not matching its digest, a
 * redirect loop, the Bearer token flow, a manifest too big or of a foreign kind; a small
 * blob read into memory and a sigstore attachment that fail.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { RegistryClient } from '../../../src/sources/registry/client.js';
import { parseDockerReference } from '../../../src/sources/registry/reference.js';
import { readSigstoreAttachments } from '../../../src/sources/registry/sigstore.js';
import type { AuthFile } from '../../../src/sources/registry/auth-file.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
interface Fake {
  host: string;
  seen: { url: string; authorization?: string; range?: string; accept?: string }[];
  close(): Promise<void>;
}
const servers: Fake[] = [];
async function serve(handler: Handler): Promise<Fake> {
  const seen: Fake['seen'] = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url!, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}), ...(req.headers.range ? { range: req.headers.range } : {}), ...(req.headers.accept ? { accept: req.headers.accept } : {}) });
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const f: Fake = {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  servers.push(f);
  return f;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-faults-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const BLOB = Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 7919) % 251));
const DIGEST = `sha256:${createHash('sha256').update(BLOB).digest('hex')}`;
const D = { digest: DIGEST, size: BLOB.length };
let n = 0;
const dest = () => path.join(scratch, `blob-${n++}`);
const USER = { username: 'u', password: 'secret-pw' };
const AUTH: AuthFile = { path: '/test/auth.json', entries: new Map() };
const client = (host: string, o: Record<string, unknown> = {}) => new RegistryClient(parseDockerReference(`docker://${host}/os:1`), { plainHttp: true, backoffMs: 5, stallMs: 2000, auth: AUTH, ...o });
const withCreds = (host: string): AuthFile => ({ path: '/test/auth.json', entries: new Map([[host, USER]]) });
const basic = `Basic ${Buffer.from('u:secret-pw').toString('base64')}`;

/** Serves the blob, honouring Range with a 206 unless told not to. */
function blobAnswer(req: http.IncomingMessage, res: http.ServerResponse, o: { ignoreRange?: boolean; body?: Buffer } = {}): void {
  const body = o.body ?? BLOB;
  const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  if (m && !o.ignoreRange) {
    const from = Number(m[1]);
    res.writeHead(206, { 'content-range': `bytes ${from}-${body.length - 1}/${body.length}`, 'content-length': body.length - from });
    res.end(body.subarray(from));
    return;
  }
  res.writeHead(200, { 'content-length': body.length });
  res.end(body);
}

const caught = async (p: Promise<unknown>): Promise<StagedrootError> => {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(StagedrootError);
  return e as StagedrootError;
};

describe('redirects', () => {
  it('follows a redirect to blob storage on another host without sending it the Authorization', async () => {
    const storage = await serve((req, res) => blobAnswer(req, res));
    const reg = await serve((req, res) => {
      if (!req.headers.authorization) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="test"' }).end();
        return;
      }
      res.writeHead(307, { location: `http://${storage.host}/storage/blob?sig=1` }).end();
    });
    const file = dest();
    const got = await client(reg.host, { auth: withCreds(reg.host) }).fetchBlob(D, file, 'layer 1 of 1');
    expect(got).toEqual({ fetched: BLOB.length, cached: 0, resumed: false });
    expect(fs.readFileSync(file).equals(BLOB)).toBe(true);
    expect(reg.seen.map((s) => s.authorization)).toEqual([undefined, basic]);
    expect(storage.seen).toEqual([{ url: '/storage/blob?sig=1' }]);
  });

  it('a redirect loop is REGISTRY_FAILED naming the blob, after 10 hops', async () => {
    const reg = await serve((req, res) => res.writeHead(302, { location: req.url + 'x' }).end());
    const e = await caught(client(reg.host).fetchBlob(D, dest(), 'layer 2 of 3'));
    expect(e.code).toBe('REGISTRY_FAILED');
    expect(e.message).toBe(`${reg.host}/os:1: blob ${DIGEST} (layer 2 of 3): more than 10 redirects (a redirect loop?), the last to http://${reg.host}`);
    expect(reg.seen).toHaveLength(11);
  });
});

describe('retries', () => {
  it('429 with Retry-After is waited for, then the blob comes', async () => {
    let calls = 0;
    const reg = await serve((req, res) => {
      if (calls++ === 0) res.writeHead(429, { 'retry-after': '1' }).end();
      else blobAnswer(req, res);
    });
    const t0 = Date.now();
    const got = await client(reg.host).fetchBlob(D, dest(), 'layer 1 of 1');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expect(got.fetched).toBe(BLOB.length);
    expect(reg.seen).toHaveLength(2);
  });

  it('503 every time: REGISTRY_FAILED after the retries, saying how many', async () => {
    const reg = await serve((_q, res) => res.writeHead(503, { 'retry-after': '0' }).end());
    const e = await caught(client(reg.host, { retries: 2 }).manifest('1'));
    expect(e.code).toBe('REGISTRY_FAILED');
    expect(e.message).toBe(`${reg.host}/os:1: the manifest (tag 1): the registry answered 503 (after 3 attempts)`);
    expect(reg.seen).toHaveLength(3);
  });

  it('a refused connection: REGISTRY_FAILED naming the host', async () => {
    const gone = await serve(() => {});
    const host = gone.host;
    await gone.close();
    servers.pop();
    const e = await caught(client(host, { retries: 1 }).manifest('1'));
    expect(e.message).toBe(`${host}/os:1: the manifest (tag 1): ${host}: ECONNREFUSED (after 2 attempts)`);
  });
});

describe('interrupted blobs', () => {
  it('a stall mid-blob: what came is kept and the rest fetched with Range (206)', async () => {
    let calls = 0;
    const reg = await serve((req, res) => {
      if (calls++ === 0) {
        res.writeHead(200, { 'content-length': BLOB.length });
        res.write(BLOB.subarray(0, 70_000)); // then nothing
        return;
      }
      blobAnswer(req, res);
    });
    const file = dest();
    const got = await client(reg.host, { stallMs: 300 }).fetchBlob(D, file, 'layer 1 of 1');
    expect(got.resumed).toBe(true);
    expect(got.fetched).toBe(BLOB.length);
    expect(reg.seen[1]!.range).toBe('bytes=70000-');
    expect(fs.readFileSync(file).equals(BLOB)).toBe(true);
    expect(fs.existsSync(`${file}.partial`)).toBe(false);
  });

  it('a 200 to the Range request starts over cleanly (no bytes twice)', async () => {
    let calls = 0;
    const reg = await serve((req, res) => {
      if (calls++ === 0) {
        res.writeHead(200, { 'content-length': BLOB.length });
        res.write(BLOB.subarray(0, 50_000), () => res.socket?.destroy()); // the connection is cut
        return;
      }
      blobAnswer(req, res, { ignoreRange: true });
    });
    const file = dest();
    const got = await client(reg.host).fetchBlob(D, file, 'layer 1 of 1');
    expect(reg.seen[1]!.range).toMatch(/^bytes=\d+-$/);
    expect(got.resumed).toBe(false);
    expect(fs.readFileSync(file).equals(BLOB)).toBe(true);
  });

  it('what a killed pull left in DEST.partial is hashed again and resumed by the next client', async () => {
    const reg = await serve((req, res) => blobAnswer(req, res));
    const file = dest();
    fs.writeFileSync(`${file}.partial`, BLOB.subarray(0, 123_456));
    const got = await client(reg.host).fetchBlob(D, file, 'layer 1 of 1');
    expect(got).toEqual({ fetched: BLOB.length - 123_456, cached: 123_456, resumed: true });
    expect(reg.seen.map((s) => s.range)).toEqual(['bytes=123456-']);
    expect(fs.readFileSync(file).equals(BLOB)).toBe(true);
  });

  it('a partial file whose bytes are wrong is found out at the end and removed, the blob never in place', async () => {
    const reg = await serve((req, res) => blobAnswer(req, res));
    const file = dest();
    const wrong = Buffer.from(BLOB.subarray(0, 1000));
    wrong[10] = wrong[10]! ^ 1;
    fs.writeFileSync(`${file}.partial`, wrong);
    const e = await caught(client(reg.host).fetchBlob(D, file, 'layer 1 of 1'));
    expect(e.code).toBe('SOURCE_CORRUPT');
    expect(e.message).toMatch(/does not match its digest: its content hashes to sha256:/);
    expect(fs.existsSync(file)).toBe(false);
    expect(fs.existsSync(`${file}.partial`)).toBe(false);
    // the next try fetches it whole
    expect((await client(reg.host).fetchBlob(D, file, 'layer 1 of 1')).fetched).toBe(BLOB.length);
  });

  it('the connection cut every time: REGISTRY_FAILED after the retries, the bytes kept for the next run', async () => {
    const reg = await serve((req, res) => {
      const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
      res.writeHead(from ? 206 : 200, { 'content-length': BLOB.length - from, ...(from ? { 'content-range': `bytes ${from}-${BLOB.length - 1}/${BLOB.length}` } : {}) });
      res.write(BLOB.subarray(from, from + 10_000), () => res.socket?.destroy());
    });
    const file = dest();
    const e = await caught(client(reg.host, { retries: 2 }).fetchBlob(D, file, 'layer 1 of 1'));
    expect(e.code).toBe('REGISTRY_FAILED');
    expect(e.message).toMatch(/the connection was cut at byte 30000 of 200000 .*\(after 3 attempts; the 30000 bytes fetched are kept for the next try\)/);
    expect(fs.statSync(`${file}.partial`).size).toBe(30_000);
    expect(fs.existsSync(file)).toBe(false);
  });
});

describe('a registry that lies', () => {
  it('a blob longer than declared stops at the first extra byte; nothing is kept', async () => {
    const reg = await serve((_q, res) => {
      res.writeHead(200); // chunked: no length said
      res.write(BLOB);
      res.end(Buffer.alloc(5000));
    });
    const file = dest();
    const e = await caught(client(reg.host).fetchBlob(D, file, 'layer 1 of 2'));
    expect(e.code).toBe('SOURCE_CORRUPT');
    expect(e.message).toBe(`${reg.host}/os:1: blob ${DIGEST} (layer 1 of 2) is larger than the ${BLOB.length} bytes its descriptor declares`);
    expect(fs.existsSync(file) || fs.existsSync(`${file}.partial`)).toBe(false);
  });

  it('bytes that do not match the digest: SOURCE_CORRUPT, nothing kept', async () => {
    const other = Buffer.from(BLOB);
    other[99_999] = other[99_999]! ^ 0xff;
    const reg = await serve((req, res) => blobAnswer(req, res, { body: other }));
    const file = dest();
    const e = await caught(client(reg.host).fetchBlob(D, file, 'the config'));
    expect(e.code).toBe('SOURCE_CORRUPT');
    expect(e.message).toMatch(new RegExp(`blob ${DIGEST} \\(the config\\) does not match its digest`));
    expect(fs.existsSync(file) || fs.existsSync(`${file}.partial`)).toBe(false);
  });

  it('a manifest over 4 MiB is refused unread; a schema-1 manifest is not read', async () => {
    const big = await serve((_q, res) => res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json', 'content-length': 5 * 1024 * 1024 }).end(Buffer.alloc(5 * 1024 * 1024, 32)));
    const e = await caught(client(big.host).manifest('1'));
    expect(e.code).toBe('UNSAFE_ENTRY');
    expect(e.message).toMatch(/the manifest \(tag 1\) is 5242880 bytes \(limit 4194304/);
    const v1 = await serve((_q, res) => res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v1+prettyjws' }).end(JSON.stringify({ schemaVersion: 1, name: 'os', tag: '1' })));
    const e1 = await caught(client(v1.host).manifest('1'));
    expect(e1.code).toBe('SOURCE_UNSUPPORTED');
    expect(e1.message).toMatch(/has the media type "application\/vnd.docker.distribution.manifest.v1\+prettyjws", which is no OCI or Docker v2 manifest or index/);
    expect(v1.seen[0]!.accept).toBe('application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json');
  });

  it('a manifest by digest that hashes to another digest, or one that contradicts Docker-Content-Digest', async () => {
    const body = JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: {}, layers: [] });
    const reg = await serve((_q, res) => res.writeHead(200, { 'docker-content-digest': `sha256:${'1'.repeat(64)}` }).end(body));
    const e = await caught(client(reg.host).manifest(`sha256:${'2'.repeat(64)}`));
    expect(e).toMatchObject({ code: 'SOURCE_CORRUPT' });
    expect(e.message).toMatch(/does not match its digest/);
    const e2 = await caught(client(reg.host).manifest('1'));
    expect(e2.message).toMatch(/hashes to sha256:[0-9a-f]{64}, not the sha256:1{64} the registry's Docker-Content-Digest says/);
  });
});

describe('Bearer tokens', () => {
  async function tokenRegistry(expiresIn: number) {
    let issued = 0;
    const auth = await serve((req, res) => {
      const u = new URL(req.url!, 'http://x');
      if (req.headers.authorization !== basic) return void res.writeHead(401).end();
      expect(u.searchParams.get('service')).toBe('test-registry');
      expect(u.searchParams.get('scope')).toBe('repository:os:pull');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: `tok-${++issued}`, expires_in: expiresIn }));
    });
    const reg = await serve((req, res) => {
      if (!/^Bearer tok-\d+$/.test(req.headers.authorization ?? '')) {
        res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${auth.host}/token",service="test-registry",scope="repository:os:pull"` }).end();
        return;
      }
      blobAnswer(req, res);
    });
    return { auth, reg, issued: () => issued };
  }

  it('gets a token from the realm with the credentials, and reuses it until it expires', async () => {
    const { auth, reg, issued } = await tokenRegistry(300);
    const c = client(reg.host, { auth: withCreds(reg.host) });
    await c.fetchBlob(D, dest(), 'layer 1 of 2');
    await c.fetchBlob(D, dest(), 'layer 2 of 2');
    expect(issued()).toBe(1);
    expect(auth.seen).toHaveLength(1);
    expect(reg.seen.map((s) => s.authorization)).toEqual([undefined, 'Bearer tok-1', 'Bearer tok-1']);
  });

  it('an expired token is fetched again', async () => {
    const { reg, issued } = await tokenRegistry(1); // less than the 5 s kept back: expired at once
    const c = client(reg.host, { auth: withCreds(reg.host) });
    await c.fetchBlob(D, dest(), 'layer 1 of 2');
    await c.fetchBlob(D, dest(), 'layer 2 of 2');
    expect(issued()).toBe(2);
  });

  it('a token service that refuses the credentials: REGISTRY_FAILED naming the file, not the password', async () => {
    const { reg } = await tokenRegistry(300);
    const e = await caught(client(reg.host, { auth: { path: '/test/auth.json', entries: new Map([[reg.host, { username: 'u', password: 'wrong-pw' }]]) } }).fetchBlob(D, dest(), 'layer 1 of 1'));
    expect(e.code).toBe('REGISTRY_FAILED');
    expect(e.message).toMatch(/the token from http:\/\/127\.0\.0\.1:\d+\/token: the token service refused the credentials for 127\.0\.0\.1:\d+ in \/test\/auth\.json \(401\)/);
    expect(e.message).not.toMatch(/wrong-pw|secret-pw/);
  });
});

describe('progress', () => {
  it('a blob reports its bytes as they arrive, every MiB, with what a resume kept', async () => {
    const big = Buffer.from(Array.from({ length: 2.5 * 1024 * 1024 }, (_, i) => (i * 31) % 253));
    const d = { digest: `sha256:${createHash('sha256').update(big).digest('hex')}`, size: big.length };
    const reg = await serve((req, res) => blobAnswer(req, res, { body: big }));
    const seen: { bytes: number; fetched: number; cached: number }[] = [];
    await client(reg.host).fetchBlob(d, dest(), 'layer 1 of 1', (p) => {
      expect(p.size).toBe(big.length);
      seen.push({ bytes: p.bytes, fetched: p.fetched, cached: p.cached });
    });
    expect(seen.map((s) => Math.floor(s.bytes / 2 ** 20))).toEqual([1, 2]);
    expect(seen.every((s) => s.cached === 0 && s.fetched === s.bytes)).toBe(true);
    const file = dest();
    fs.writeFileSync(`${file}.partial`, big.subarray(0, 1.5 * 2 ** 20));
    const resumed: { bytes: number; fetched: number; cached: number }[] = [];
    await client(reg.host).fetchBlob(d, file, 'layer 1 of 1', (p) => resumed.push({ bytes: p.bytes, fetched: p.fetched, cached: p.cached }));
    expect(resumed).toHaveLength(1);
    expect(resumed[0]!.bytes).toBeGreaterThanOrEqual(2 * 2 ** 20);
    expect(resumed[0]!.cached).toBe(1.5 * 2 ** 20);
    expect(resumed[0]!.fetched).toBe(resumed[0]!.bytes - 1.5 * 2 ** 20);
  });
});

describe('small blobs and sigstore attachments', () => {
  const SMALL = Buffer.from('{"critical":{}}');
  const S = { digest: `sha256:${createHash('sha256').update(SMALL).digest('hex')}`, size: SMALL.length };

  it('smallBlob: read whole and checked; longer than declared or another content is SOURCE_CORRUPT, over the limit UNSAFE_ENTRY unfetched, 503 retried', async () => {
    let calls = 0;
    const ok = await serve((_q, res) => (calls++ === 0 ? res.writeHead(503, { 'retry-after': '0' }).end() : res.writeHead(200).end(SMALL)));
    expect((await client(ok.host).smallBlob(S, 'a payload', 1024)).equals(SMALL)).toBe(true);
    expect(ok.seen).toHaveLength(2);
    const longer = await serve((_q, res) => res.writeHead(200).end(Buffer.concat([SMALL, Buffer.from('x')])));
    expect(await caught(client(longer.host).smallBlob(S, 'a payload', 1024))).toMatchObject({ code: 'SOURCE_CORRUPT', message: `${longer.host}/os:1: blob ${S.digest} (a payload) is longer, not the ${S.size} bytes its descriptor declares` });
    const other = await serve((_q, res) => res.writeHead(200).end(Buffer.from('{"critical":[]}')));
    expect((await caught(client(other.host).smallBlob(S, 'a payload', 1024))).message).toMatch(/\(a payload\) does not match its digest: its content hashes to sha256:/);
    const big = await serve((_q, res) => res.writeHead(200).end(SMALL));
    expect(await caught(client(big.host).smallBlob(S, 'a payload', 4))).toMatchObject({ code: 'UNSAFE_ENTRY', message: `${big.host}/os:1: blob ${S.digest} (a payload) is ${S.size} bytes (limit 4)` });
    expect(big.seen).toHaveLength(0);
  });

  it('an attachment: a 404 is no signature; a registry failing is REGISTRY_FAILED (the machine\'s trouble, not a refusal); a manifest of another kind is SIGNATURE_INVALID', async () => {
    const none = await serve((_q, res) => res.writeHead(404).end());
    expect(await readSigstoreAttachments(client(none.host), DIGEST)).toEqual({ tag: `${DIGEST.replace(':', '-')}.sig`, found: false, signatures: [], others: 0 });
    expect(none.seen.map((s) => s.url)).toEqual([`/v2/os/manifests/${DIGEST.replace(':', '-')}.sig`]);
    const failing = await serve((_q, res) => res.writeHead(500).end());
    expect(await caught(readSigstoreAttachments(client(failing.host, { retries: 1 }), DIGEST))).toMatchObject({ code: 'REGISTRY_FAILED', message: `${failing.host}/os:1: the sigstore attachment (tag ${DIGEST.replace(':', '-')}.sig): the registry answered 500 (after 2 attempts)` });
    const docker = JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: S.digest, size: S.size }, layers: [] });
    const v2 = await serve((_q, res) => res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }).end(docker));
    const e = await caught(readSigstoreAttachments(client(v2.host), DIGEST));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(e.message).toBe(`${v2.host}/os:1: the sigstore attachment ${DIGEST.replace(':', '-')}.sig (sha256:${createHash('sha256').update(docker).digest('hex')}) is application/vnd.docker.distribution.manifest.v2+json, not an OCI image manifest`);
  });
});
