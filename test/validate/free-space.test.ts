import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { buildTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { Sysroot } from '../../src/sysroot.js';
import { StagedrootError } from '../../src/errors.js';
import { bytes, type ChangeOp, type ChangeSet } from '../../src/changeset.js';
import { estimateBytes } from '../../src/validate/free-space.js';
import { whyNoTmpfs } from '../helpers/mounts.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

describe('free-space preflight', () => {
  it('estimates the copied bytes outside the hardlinked prefixes plus the change set', async () => {
    t = await tempSysroot({ tree: { 'usr/bin/big': 'u'.repeat(10_000), 'etc/a': 'a'.repeat(300), 'srv/b': 'b'.repeat(700), 'etc/empty': '' } });
    const manifest = path.join(t.dir, 'deploy/0001/manifest.ndjson');
    const cs: ChangeSet = { description: 'x', ops: [{ op: 'write', path: 'etc/n', content: bytes('n'.repeat(50)) }, { op: 'write', path: 'etc/s', content: { kind: 'stream', size: 25, open: async function* () {} } }, { op: 'mkdir', path: 'srv' }] };
    const est = await estimateBytes(manifest, ['usr'], cs);
    expect(est).toMatchObject({ copyBytes: 1000, changeBytes: 75 });
    expect(est.needed).toBe(1075 + fs.statSync(manifest).size);
    // A streamed change set (an archive) cannot be sized up front.
    const streamed: ChangeSet = { description: 'tar', ops: (async function* (): AsyncGenerator<ChangeOp> {})() };
    expect((await estimateBytes(manifest, ['usr'], streamed)).changeBytes).toBeNull();
  });

  it('rejects early with NO_SPACE naming bytes needed and bytes free; nothing is built', async () => {
    t = await tempSysroot({ tree: { 'etc/a': 'a'.repeat(4096) } });
    const err = (await t.sysroot.stage({ files: [{ path: '/etc/b', contents: 'b' }] }, { builtins: { freeSpace: { reserveBytes: 2 ** 50 } } }).catch((e: unknown) => e)) as StagedrootError;
    expect(err).toBeInstanceOf(StagedrootError);
    expect(err.code).toBe('NO_SPACE');
    expect(err.message).toMatch(/needed \(4\.0 KiB \(4096 bytes\) copied from the booted tree \+ 1 bytes of new content \+ .* of manifest \+ 1\.0 PiB \(1125899906842624 bytes\) reserved\), .* free on the filesystem of /);
    const { needed, free } = err.value as { needed: number; free: number };
    expect(needed).toBeGreaterThan(free);
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual(['0001']);
    expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
    expect(t.sysroot.status().lastFailure).toMatchObject({ phase: 'validate', code: 'NO_SPACE' });
  });

  const canMount = whyNoTmpfs();
  if (canMount) console.warn(`SKIPPED the real-statfs preflight test: ${canMount}`);

  it.skipIf(canMount !== null)('on a nearly full filesystem (a 4 MiB tmpfs): rejected before the copy, instead of ENOSPC halfway', async () => {
    const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-tmpfs-'));
    execaSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt]);
    try {
      const src = buildTree(path.join(os.tmpdir(), `stagedroot-big-${process.pid}`), { 'etc/big': Buffer.alloc(2_500_000, 1) });
      const s = await Sysroot.init(path.join(mnt, 'sysroot'), { fromDirectory: src });
      fs.rmSync(src, { recursive: true });
      const err = (await s.stage({ files: [{ path: '/etc/x', contents: 'x' }] }).catch((e: unknown) => e)) as StagedrootError;
      expect(err.code).toBe('NO_SPACE');
      expect(err.message).toContain('2.4 MiB (2500000 bytes) copied from the booted tree');
      expect(fs.readdirSync(path.join(mnt, 'sysroot/work'))).toEqual([]);
      // Without the preflight the same stage runs into ENOSPC in the middle of the copy.
      const late = (await s.stage({ files: [{ path: '/etc/x', contents: 'x' }] }, { builtins: { freeSpace: false } }).catch((e: unknown) => e)) as StagedrootError;
      expect(late.code).toBe('NO_SPACE');
      expect(late.errno).toBe('ENOSPC');
      expect(s.status().current).toBe('0001');
    } finally {
      execaSync('umount', [mnt]);
      fs.rmdirSync(mnt);
    }
  });
});
