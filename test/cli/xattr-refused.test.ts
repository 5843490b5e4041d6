import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';

/**
 * A sysroot on a filesystem without the user.* namespace (ramfs has no extended
 * attributes at all): init from a tree that carries one fails naming the attribute and
 * the path, or, asked to, drops it with a warning. Never silently.
 */
function whyNoRamfs(): string | null {
  if (process.getuid?.() !== 0) return 'not root (mounting a ramfs needs root)';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-ramfs-probe-'));
  try {
    execFileSync('mount', ['-t', 'ramfs', 'ramfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir]);
    return null;
  } catch (err) {
    return `cannot mount a ramfs: ${(err as Error).message.split('\n')[0]}`;
  } finally {
    fs.rmdirSync(dir);
  }
}
const why = whyNoRamfs();
if (why) console.warn(`SKIPPED: xattr refusal tests: ${why}`);

let base: string | undefined;
let mnt: string | undefined;
afterEach(() => {
  if (mnt) execFileSync('umount', [mnt]);
  mnt = undefined;
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

describe.skipIf(why !== null)('a filesystem that refuses an attribute', () => {
  it('fails with XATTR_UNSUPPORTED naming the attribute and path, or drops it with a warning when asked', async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-xattr-refused-'));
    const src = path.join(base, 'src');
    fs.mkdirSync(path.join(src, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(src, 'etc/os-release'), 'ID=x\n');
    execFileSync('setfattr', ['-n', 'user.origin', '-v', 'base', path.join(src, 'etc/os-release')]);
    mnt = path.join(base, 'ramfs');
    fs.mkdirSync(mnt);
    execFileSync('mount', ['-t', 'ramfs', 'ramfs', mnt]);

    const strict = await cli(['init', '--sysroot', path.join(mnt, 'a'), '--from', src]);
    expect(strict.code).toBe(1);
    expect(strict.err).toMatch(/^stagedroot: XATTR_UNSUPPORTED: .*user\.origin.*etc\/os-release/m);

    const dropped = await cli(['init', '--sysroot', path.join(mnt, 'b'), '--from', src, '--drop-unsupported-xattrs']);
    expect(dropped.code, dropped.err).toBe(0);
    expect(dropped.err).toContain('warning: dropped the extended attribute user.origin of etc/os-release');
    expect(fs.readFileSync(path.join(mnt, 'b/current/etc/os-release'), 'utf8')).toBe('ID=x\n');
    expect((await cli(['verify', '--sysroot', path.join(mnt, 'b')])).code).toBe(0);
  });
});
