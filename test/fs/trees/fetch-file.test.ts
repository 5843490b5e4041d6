import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PartialFile, fileSize } from '../../../src/fs/trees/fetch-file.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-fetch-file-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

async function readAll(p: PartialFile): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of p.chunks()) parts.push(c);
  return Buffer.concat(parts).toString();
}

describe('PartialFile: a blob written as it arrives, found at its place only once committed', () => {
  it('appends chunks under DEST.partial; a reopen keeps them (a resume); commit makes DEST and leaves no partial', async () => {
    const dest = path.join(dir, 'blobs/sha256/abc');
    const p = await PartialFile.open(dest);
    p.appendSync(Buffer.from('hello '));
    p.appendSync(new Uint8Array(Buffer.from('wor')));
    expect(p.size).toBe(9);
    expect(await fileSize(dest)).toBeNull();
    await p.close();
    const again = await PartialFile.open(dest);
    expect(again.size).toBe(9);
    again.appendSync(Buffer.from('ld'));
    expect(await readAll(again)).toBe('hello world');
    await again.commit(dest);
    expect(fs.readFileSync(dest, 'utf8')).toBe('hello world');
    expect(fs.existsSync(`${dest}.partial`)).toBe(false);
  });

  it('truncate starts over; discard removes the partial file', async () => {
    const dest = path.join(dir, 'm');
    const p = await PartialFile.open(dest);
    p.appendSync(Buffer.from('stale bytes'));
    await p.truncate();
    expect(p.size).toBe(0);
    p.appendSync(Buffer.from('{}'));
    expect(await readAll(p)).toBe('{}');
    await p.discard();
    expect(fs.existsSync(`${dest}.partial`)).toBe(false);
    expect(fs.existsSync(dest)).toBe(false);
  });

  it('a write after close is an IO error naming the file; a symlink at the partial name is not followed', async () => {
    const dest = path.join(dir, 'b');
    const p = await PartialFile.open(dest);
    await p.close();
    expect(() => p.appendSync(Buffer.from('x'))).toThrow(expect.objectContaining({ code: 'IO', message: expect.stringContaining(`${dest}.partial`) }));
    const target = path.join(dir, 'elsewhere');
    fs.writeFileSync(target, 'keep');
    fs.symlinkSync(target, path.join(dir, 'c.partial'));
    await expect(PartialFile.open(path.join(dir, 'c'))).rejects.toMatchObject({ code: 'IO' });
    expect(fs.readFileSync(target, 'utf8')).toBe('keep');
  });
});
