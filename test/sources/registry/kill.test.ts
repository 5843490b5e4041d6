/**
 * A pull killed (SIGKILL) at random points of a blob: each next run resumes from what the
 * killed one left in DEST.partial, and the blob ends whole, never taken whole before.
 */
import { createHash, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RegistryClient } from '../../../src/sources/registry/client.js';
import { parseDockerReference } from '../../../src/sources/registry/reference.js';

const BLOB = randomBytes(3 * 1024 * 1024);
const DIGEST = `sha256:${createHash('sha256').update(BLOB).digest('hex')}`;
const CHILD = path.join(import.meta.dirname, 'fetch-child.mjs');
let server: http.Server;
let host: string;
const ranges: string[] = [];
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-kill-'));

beforeAll(async () => {
  // Serves the blob slowly (32 KiB every 10 ms), honouring Range with a 206.
  server = http.createServer((req, res) => {
    const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    ranges.push(req.headers.range ?? '');
    res.writeHead(from ? 206 : 200, { 'content-length': BLOB.length - from, ...(from ? { 'content-range': `bytes ${from}-${BLOB.length - 1}/${BLOB.length}` } : {}) });
    let pos = from;
    const tick = setInterval(() => {
      if (pos >= BLOB.length || res.destroyed) {
        clearInterval(tick);
        res.end();
        return;
      }
      res.write(BLOB.subarray(pos, pos + 32 * 1024));
      pos += 32 * 1024;
    }, 10);
    res.on('close', () => clearInterval(tick));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  expect(fs.existsSync(path.join(import.meta.dirname, '../../../dist/sources/registry/client.js')), 'needs the build (npm run build)').toBe(true);
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
  fs.rmSync(scratch, { recursive: true, force: true });
});

/** Runs the child until DEST.partial holds at least `bytes`, then kills it; the size it left. */
async function killAfter(dest: string, bytes: number): Promise<number> {
  const child = spawn(process.execPath, [CHILD, host, DIGEST, String(BLOB.length), dest], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  for (;;) {
    const size = fs.existsSync(`${dest}.partial`) ? fs.statSync(`${dest}.partial`).size : 0;
    if (size >= bytes) break;
    if (child.exitCode !== null) throw new Error(`the child ended before it was killed (${child.exitCode}): ${err}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  child.kill('SIGKILL');
  await exited;
  return fs.statSync(`${dest}.partial`).size;
}

it('a pull killed at random points resumes each time and ends with the whole blob', async () => {
  const dest = path.join(scratch, 'blob');
  const points = [0.1, 0.35, 0.6].map((f) => Math.floor(BLOB.length * (f + Math.random() * 0.1)));
  let left = 0;
  for (const p of points) {
    ranges.length = 0;
    const before = left;
    left = await killAfter(dest, p);
    expect(left).toBeGreaterThanOrEqual(p);
    expect(left).toBeLessThan(BLOB.length);
    // never in place before it is whole; what is there is a prefix of the blob
    expect(fs.existsSync(dest)).toBe(false);
    expect(fs.readFileSync(`${dest}.partial`).equals(BLOB.subarray(0, left))).toBe(true);
    // the killed run resumed from what the one before it left
    expect(ranges[0]).toBe(before === 0 ? '' : `bytes=${before}-`);
  }
  ranges.length = 0;
  const got = await new RegistryClient(parseDockerReference(`docker://${host}/os:1`), { plainHttp: true, auth: null }).fetchBlob({ digest: DIGEST, size: BLOB.length }, dest, 'layer 1 of 1');
  expect(got).toEqual({ fetched: BLOB.length - left, cached: left, resumed: true });
  expect(ranges).toEqual([`bytes=${left}-`]);
  expect(fs.readFileSync(dest).equals(BLOB)).toBe(true);
  expect(fs.existsSync(`${dest}.partial`)).toBe(false);
}, 60_000);
