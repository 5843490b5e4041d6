import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../../src/fs/manifests/manifest.js';
import { isFileLineFor, parseManifestLine } from '../../../src/fs/manifests/manifest-line.js';

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

const H = 'a'.repeat(64);
const X = '0123456789abcdef0123456789abcdef';

describe('manifest attribute digest and byte names', () => {
  it('loads manifests written before the x field, and lines with it', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-manifest-x-'));
    const file = path.join(base, 'm');
    fs.writeFileSync(file, [
      `{"p":"etc","t":"d","m":493,"u":0,"g":0}`,
      `{"p":"etc/a","t":"f","m":420,"u":0,"g":0,"s":1,"h":"${H}","mt":5}`,
      `{"p":"etc/b","t":"f","m":420,"u":0,"g":0,"s":1,"h":"${H}","mt":5,"x":"${X}"}`,
      `{"p":"etc/caf\\udce9","t":"l","m":511,"u":0,"g":0,"l":"x\\udcff","x":"${X}"}`,
    ].join('\n') + '\n');
    const e = [...readManifest(file)];
    expect(e.map((x) => x.x)).toEqual([undefined, undefined, X, X]);
    expect(e[3]!.p).toBe('etc/caf\udce9');
    expect(e[3]!.l).toBe('x\udcff');
    expect(() => parseManifestLine(`{"p":"a","t":"d","m":1,"u":0,"g":0,"x":"zz"}`, file, 'line 1')).toThrow(/invalid/);
  });

  it('reuses a file line only when the attribute digest, the inode and the ctime match', () => {
    const st = { mode: 0o100644, uid: 0, gid: 0, size: 1, mtimeMs: 5, ino: 7, ctimeMs: 6.0015 } as fs.Stats;
    const old = `{"p":"a","t":"f","m":420,"u":0,"g":0,"s":1,"h":"${H}","mt":5}`;
    const plain = `{"p":"a","t":"f","m":420,"u":0,"g":0,"s":1,"h":"${H}","mt":5,"i":7,"c":6002}`;
    const withX = `{"p":"a","t":"f","m":420,"u":0,"g":0,"s":1,"h":"${H}","mt":5,"i":7,"c":6002,"x":"${X}"}`;
    expect(isFileLineFor(plain, 'a', st)).toBe(true);
    expect(isFileLineFor(withX, 'a', st)).toBe(false);
    expect(isFileLineFor(withX, 'a', st, X)).toBe(true);
    expect(isFileLineFor(plain, 'a', st, X)).toBe(false);
    // A line written before inode and ctime were recorded is never taken as unchanged.
    expect(isFileLineFor(old, 'a', st)).toBe(false);
    expect(isFileLineFor(plain, 'a', { ...st, ino: 8 } as fs.Stats)).toBe(false);
    expect(isFileLineFor(plain, 'a', { ...st, ctimeMs: 6.003 } as fs.Stats)).toBe(false);
    expect(parseManifestLine(withX, 'm', 'line 1')).toMatchObject({ mt: 5, i: 7, c: 6002, x: X });
  });
});
