import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { keyIdOf, parsePublicKey, parseSignature } from '../../src/trust/minisign.js';
import { filePayload } from '../../src/trust/payload.js';
import { verifySignature } from '../../src/trust/verify.js';
import { tool } from '../helpers/tools.js';
import { minisignKey, minisignSign } from './minisign-keys.js';

let dir: string;
let k1: { pub: string; key: string; id: string };
let k2: { pub: string; key: string; id: string };
const read = (p: string) => fs.readFileSync(p, 'utf8');
const key = (p: string) => parsePublicKey(read(p), p);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-trust-'));
  k1 = await minisignKey(dir, 'one');
  k2 = await minisignKey(dir, 'two');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string | Buffer): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, content);
  return p;
}

async function check(payload: string, sig: string, keys = [key(k1.pub)]) {
  return verifySignature(filePayload(payload), read(sig), sig, keys);
}

async function rejection(p: Promise<unknown>): Promise<StagedrootError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(StagedrootError);
  expect((err as StagedrootError).code).toBe('SIGNATURE_INVALID');
  return err as StagedrootError;
}

describe('minisign formats, against the real minisign tool', () => {
  it('reads the key id minisign prints', () => {
    expect(key(k1.pub).keyId).toBe(k1.id);
    // the bare base64 line `minisign -P` takes is a key too
    expect(parsePublicKey(read(k1.pub).split('\n')[1]!, 'line').keyId).toBe(k1.id);
  });

  it('prints key ids as minisign does: little-endian hex, no leading zeros', () => {
    expect(keyIdOf(Buffer.from([0x9d, 0x27, 0xab, 0xc9, 0xd9, 0xfe, 0xb6, 0x1b]))).toBe('1BB6FED9C9AB279D');
    expect(keyIdOf(Buffer.from([0x01, 0, 0, 0, 0, 0, 0x10, 0x00]))).toBe('10000000000001');
  });

  it('verifies a prehashed (ED) signature and returns its trusted comment', async () => {
    const f = file('a.txt', 'hello\n');
    const sig = await minisignSign(k1.key, f, { comment: 'release 42' });
    expect(parseSignature(read(sig), sig).algorithm).toBe('ED');
    const v = await check(f, sig);
    expect(v).toMatchObject({ keyId: k1.id, algorithm: 'ED', trustedComment: 'release 42' });
    // minisign itself agrees
    await tool('minisign', ['-V', '-p', k1.pub, '-m', f]);
  });

  it('keeps the trailing spaces of a trusted comment: they are signed (minisign trims only the line end)', async () => {
    const f = file('spaces.txt', 'hello\n');
    const sig = await minisignSign(k1.key, f, { comment: 'release 42   ' });
    expect(read(sig)).toContain('trusted comment: release 42   \n');
    await tool('minisign', ['-V', '-p', k1.pub, '-m', f]); // minisign verifies it as written
    expect(await check(f, sig)).toMatchObject({ trustedComment: 'release 42   ' });
    expect(parseSignature(read(sig), sig).trusted!.comment).toBe('release 42   ');
    // A CRLF file (a signature passed through Windows) is the same signature.
    const crlf = file('spaces.txt.crlf.minisig', read(sig).replace(/\n/g, '\r\n'));
    expect(await check(f, crlf)).toMatchObject({ trustedComment: 'release 42   ' });
  });

  it('verifies a legacy (Ed) signature', async () => {
    const f = file('b.txt', Buffer.alloc(100_000, 7));
    const sig = await minisignSign(k1.key, f, { legacy: true, comment: 'legacy' });
    expect(parseSignature(read(sig), sig).algorithm).toBe('Ed');
    expect(await check(f, sig)).toMatchObject({ algorithm: 'Ed', trustedComment: 'legacy' });
  });

  it('rejects a tampered payload, naming the key', async () => {
    for (const legacy of [false, true]) {
      const f = file(`c${legacy}.txt`, 'original\n');
      const sig = await minisignSign(k1.key, f, { legacy });
      fs.appendFileSync(f, 'evil\n');
      const err = await rejection(check(f, sig));
      expect(err.message).toContain(k1.id);
      expect(err.message).toContain('does not match');
      expect((await tool('minisign', ['-V', '-p', k1.pub, '-m', f], { reject: false })).exitCode).not.toBe(0);
    }
  });

  it('rejects a tampered signature', async () => {
    const f = file('d.txt', 'data\n');
    const sig = await minisignSign(k1.key, f);
    const ls = read(sig).split('\n');
    const raw = Buffer.from(ls[1]!, 'base64');
    raw[40] = raw[40]! ^ 1; // a bit of the signature itself, not the key id
    ls[1] = raw.toString('base64');
    fs.writeFileSync(sig, ls.join('\n'));
    expect((await rejection(check(f, sig))).message).toContain(k1.id);
  });

  it('rejects a tampered trusted comment (global signature)', async () => {
    const f = file('e.txt', 'data\n');
    const sig = await minisignSign(k1.key, f, { comment: 'version 1' });
    fs.writeFileSync(sig, read(sig).replace('trusted comment: version 1', 'trusted comment: version 9'));
    const err = await rejection(check(f, sig));
    expect(err.message).toContain('trusted comment');
    expect(err.message).toContain(k1.id);
  });

  it('rejects a signature by a key that is not trusted, naming its key id', async () => {
    const f = file('f.txt', 'data\n');
    const sig = await minisignSign(k2.key, f);
    const err = await rejection(check(f, sig));
    expect(err.message).toContain(k2.id);
    expect(err.message).toContain('not a trusted key');
    expect(err.value).toBe(k2.id);
    // trusting both keys makes it valid
    expect((await check(f, sig, [key(k1.pub), key(k2.pub)])).keyId).toBe(k2.id);
  });

  it('rejects the signature of another file', async () => {
    const f = file('g.txt', 'the update\n');
    const other = file('h.txt', 'something else\n');
    const sig = await minisignSign(k1.key, other);
    await rejection(check(f, sig));
  });

  it('verifies a signify signature (no trusted comment) with a signify key', async () => {
    const pub = path.join(dir, 'signify.pub');
    const sec = path.join(dir, 'signify.sec');
    await tool('signify-openbsd', ['-G', '-n', '-p', pub, '-s', sec, '-c', 'signify test key']);
    const f = file('s.txt', 'signed by signify\n');
    await tool('signify-openbsd', ['-S', '-s', sec, '-m', f, '-x', `${f}.sig`]);
    const v = await check(f, `${f}.sig`, [key(pub)]);
    expect(v).toMatchObject({ algorithm: 'Ed', trustedComment: null });
    fs.appendFileSync(f, 'x');
    await rejection(check(f, `${f}.sig`, [key(pub)]));
  });

  it('rejects what is not a signature or not a key', async () => {
    const f = file('i.txt', 'x');
    const junk = file('i.txt.minisig', 'untrusted comment: x\nnot base64!!\n');
    await rejection(check(f, junk));
    expect(() => parsePublicKey('hello', 'k')).toThrow(/not a minisign/);
  });
});
