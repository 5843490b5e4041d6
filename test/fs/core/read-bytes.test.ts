/**
 * readBytes, the guard against huge small inputs (documents, keys, signatures, kernels):
 * a file over the limit is refused by its size, and one that gives more than its size
 * says (a file growing while read, a /proc file, a pipe) is read no further than one
 * byte past the limit and refused too.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readBytes } from '../../../src/fs/core/host-paths.js';

let dir: string | null = null;
const tmp = (): string => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-read-bytes-')));
afterEach(() => {
  if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
  dir = null;
});

describe('readBytes', () => {
  it('reads a file up to the limit whole; one byte over is refused by its size; an absent file is null', () => {
    const d = tmp();
    const f = path.join(d, 'f');
    const data = Buffer.from(Array.from({ length: 200_000 }, (_, i) => i % 251));
    fs.writeFileSync(f, data);
    expect(readBytes(f, data.length)!.equals(data)).toBe(true);
    expect(() => readBytes(f, data.length - 1)).toThrow(expect.objectContaining({ code: 'UNSAFE_ENTRY', message: `${f} is ${data.length} bytes, more than the ${data.length - 1} allowed` }));
    fs.writeFileSync(f, '');
    expect(readBytes(f, 0)!.length).toBe(0);
    expect(readBytes(path.join(d, 'absent'), 10)).toBeNull();
  });

  it('a file whose size says less than it gives (/proc/self/status says 0) is refused past the limit, read whole under it', () => {
    expect(fs.statSync('/proc/self/status').size).toBe(0);
    expect(() => readBytes('/proc/self/status', 16)).toThrow(expect.objectContaining({ code: 'UNSAFE_ENTRY', message: expect.stringContaining('is more than the 16 bytes allowed') }));
    expect(readBytes('/proc/self/status', 1 << 20)!.toString('utf8')).toMatch(/^Name:/);
  });

  it('a pipe that keeps giving is read no further than one byte past the limit', async () => {
    const d = tmp();
    const fifo = path.join(d, 'fifo');
    await new Promise<void>((resolve, reject) => spawn('mkfifo', [fifo]).on('exit', (c) => (c === 0 ? resolve() : reject(new Error(`mkfifo: ${c}`)))));
    // The writer gives 8 MiB; the reader stops past 100 kB and closes: the writer gets EPIPE.
    const writer = spawn('sh', ['-c', `head -c 8388608 /dev/zero > '${fifo}'`], { stdio: 'ignore' });
    const ended = new Promise((r) => writer.on('exit', r));
    expect(() => readBytes(fifo, 100_000)).toThrow(expect.objectContaining({ code: 'UNSAFE_ENTRY', message: expect.stringContaining('is more than the 100000 bytes allowed') }));
    await ended;
  });
});
