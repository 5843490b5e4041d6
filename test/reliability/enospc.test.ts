import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sysroot, type StagedrootError } from '../../src/index.js';
import { buildTree, hashTree } from '../../src/testing/index.js';
import { invariantViolations } from './invariants.js';
import { mountTmpfs, unmount, whyNotMount } from './mounts.js';

/**
 * Staging onto a full filesystem (an 8 MiB tmpfs): a NO_SPACE error that gives the
 * figures, the booted tree untouched, nothing left over after recovery.
 */
const skip = whyNotMount('tmpfs');
if (skip) console.warn(`SKIPPED ENOSPC tests: ${skip}`);

describe.skipIf(skip !== null)('ENOSPC while staging (8 MiB tmpfs)', () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-enospc-'));
  const mnt = path.join(base, 'mnt');
  let dir: string;
  let sysroot: Sysroot;
  let bootedHash: string;

  beforeAll(async () => {
    // 3 MiB of tree: usr/ (hardlinked by the default policy) and etc/ (copied).
    const tree: Record<string, Buffer> = {};
    for (let i = 0; i < 10; i++) tree[`usr/lib/big${i}.bin`] = Buffer.alloc(200 * 1024, i);
    for (let i = 0; i < 10; i++) tree[`etc/conf${i}.dat`] = Buffer.alloc(100 * 1024, 100 + i);
    const src = buildTree(path.join(base, 'src'), tree);
    mountTmpfs(mnt, '8m');
    dir = path.join(mnt, 'sysroot');
    sysroot = await Sysroot.init(dir, { fromDirectory: src });
    bootedHash = hashTree(sysroot.treePath('0001'));
  });
  afterAll(() => {
    unmount(mnt);
    fs.rmSync(base, { recursive: true, force: true });
  });

  const expectNoSpaceAndClean = async (err: StagedrootError, freeBefore: number) => {
    expect(err.code).toBe('NO_SPACE');
    if (process.env.STAGEDROOT_SHOW_ERRORS) console.log(err.message);
    expect(err.errno).toBe('ENOSPC');
    // The figures: what it needs, what was free, of how much, where it ran out.
    expect(err.message).toMatch(/needs about \d+(\.\d)? MiB \(.+\), but only \d+(\.\d)? MiB was free of 8\.0 MiB on the filesystem of .+ when it began; it ran out writing \S+ \(ENOSPC\)/);
    expect(hashTree(sysroot.treePath('0001'))).toBe(bootedHash);
    const after = await invariantViolations(dir);
    expect(after.violations).toEqual([]);
    const st = after.sysroot.status();
    expect(st.deployments.map((d) => d.id)).toEqual(['0001']);
    expect(st.lastFailure).toMatchObject({ phase: 'apply', code: 'NO_SPACE' });
    // The space is given back (a few KiB of state aside).
    expect(Math.abs(fs.statfsSync(dir).bavail * fs.statfsSync(dir).bsize - freeBefore)).toBeLessThan(64 * 1024);
  };

  it('fails with NO_SPACE and the figures when the copied tree does not fit', async () => {
    const freeBefore = fs.statfsSync(dir).bavail * fs.statfsSync(dir).bsize;
    const err = (await sysroot
      .stage({ files: [{ path: '/etc/extra', contents: 'x'.repeat(3 << 20) }] }, { copyPolicy: { hardlinkPrefixes: [], mode: 'copy' } })
      .then(() => null, (e: unknown) => e)) as StagedrootError | null;
    expect(err, 'the stage should have run out of space').not.toBeNull();
    expect(err!.message).toMatch(/needs about 5\.9 MiB \(2\.9 MiB of the base tree its copy policy copies \(hardlinking nothing\) and 3\.0 MiB of update data\), but only 5\.\d MiB was free/);
    await expectNoSpaceAndClean(err!, freeBefore);
  });

  it('fails with NO_SPACE when the update itself does not fit (default policy)', async () => {
    const freeBefore = fs.statfsSync(dir).bavail * fs.statfsSync(dir).bsize;
    const err = (await sysroot.stage({ files: [{ path: '/usr/share/huge', contents: { base64: Buffer.alloc(7 << 20, 7).toString('base64') } }] }).then(
      () => null,
      (e: unknown) => e,
    )) as StagedrootError | null;
    expect(err, 'the stage should have run out of space').not.toBeNull();
    expect(err!.message).toMatch(/needs about 8\.0 MiB \(1\.0 MiB of the base tree its copy policy copies \(hardlinking usr\/\) and 7\.0 MiB of update data\)/);
    await expectNoSpaceAndClean(err!, freeBefore);
  });
});
