/**
 * ENOSPC: staging onto a small tmpfs that cannot hold the update. With the free-space
 * preflight off, the filesystem runs out in the middle of the stage: NO_SPACE naming the
 * figures (free when the stage started and when it ran out, and what the stage needs);
 * the booted tree is untouched, nothing is left behind, and a later update that fits
 * stages. With the preflight on, the stage is refused before anything is written, with
 * bytes needed and bytes free. Needs root (mount); skips with the reason otherwise.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execaSync } from 'execa';
import { describe, expect, it } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { Sysroot } from '../../src/sysroot.js';
import { buildTree, hashTree, reboot } from '../../src/testing/index.js';
import { expectConsistent, hashDeployments } from '../helpers/invariants.js';
import { whyNoTmpfs } from '../helpers/mounts.js';

const MIB = 1024 * 1024;

const cannotMount = whyNoTmpfs();
if (cannotMount) console.warn(`SKIPPED the ENOSPC tests (test/reliability/enospc.test.ts): ${cannotMount}`);

/**
 * A sysroot on a fresh 8 MiB tmpfs whose booted tree holds 3 MiB outside usr/ (copied
 * by every stage): about 5 MiB stay free, so a stage of new content up to ~2 MiB fits.
 */
async function withFullishSysroot(fn: (s: Sysroot, dir: string) => Promise<void>): Promise<void> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-enospc-'));
  const mnt = path.join(base, 'mnt');
  fs.mkdirSync(mnt);
  execaSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt]);
  try {
    const tree = buildTree(path.join(base, 'tree'), {
      'usr/bin/tool': { content: '#!/bin/sh\n', mode: 0o755 },
      'etc/hostname': 'node-1\n',
      'etc/motd': 'welcome\n',
      'var/lib/data.bin': Buffer.alloc(3 * MIB, 7),
    });
    const dir = path.join(mnt, 'sysroot');
    await fn(await Sysroot.init(dir, { fromDirectory: tree, shared: [] }), dir); // no shared /var: var/lib is part of the trees copied here
  } finally {
    execaSync('umount', [mnt]);
    fs.rmSync(base, { recursive: true, force: true });
  }
}

/** An update with `size` bytes of new content. */
function bigUpdate(size: number): { label: string; files: { path: string; contents: string }[] } {
  return { label: `big-${size}`, files: [{ path: '/var/lib/big.bin', contents: 'x'.repeat(size) }] };
}

async function stageError(p: Promise<unknown>): Promise<StagedrootError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err, 'the stage was expected to fail').toBeInstanceOf(StagedrootError);
  return err as StagedrootError;
}

/** "1.5 MiB (1572864 bytes)" → 1572864. */
const FIG = String.raw`(?:[\d.]+ \w+ \()?(\d+) bytes\)?`;
const esc = (t: string): string => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe.skipIf(cannotMount !== null)('ENOSPC on a small tmpfs', () => {
  it('preflight off: the filesystem runs out while the update is applied → NO_SPACE with the figures; booted untouched, no leftovers, a smaller update then stages', async () => {
    await withFullishSysroot(async (s, dir) => {
      const before = hashDeployments(s);
      const booted = hashTree(path.join(dir, 'current'));

      const err = await stageError(s.stage(bigUpdate(6 * MIB), { builtins: { freeSpace: false } }));
      expect(err.code).toBe('NO_SPACE');
      expect(err.errno).toBe('ENOSPC');
      expect(err.path).toBe('var/lib/big.bin');
      const m = new RegExp(`^No space left writing var/lib/big\\.bin \\(ENOSPC\\): the filesystem of ${esc(dir)} \\(${FIG}\\) had ${FIG} free when the stage started, ${FIG} after the failed write; this stage needs about ${FIG} \\(.* copied from the booted tree \\+ .* of new content \\+ .* of manifest\\)$`).exec(err.message);
      expect(m, err.message).not.toBeNull();
      const [total, freeAtStart, freeAtEnd, needed] = m!.slice(1).map(Number) as [number, number, number, number];
      expect(total).toBe(8 * MIB);
      expect(needed).toBeGreaterThan(freeAtStart); // the figures explain the failure
      expect(needed).toBeGreaterThan(9 * MIB);
      expect(freeAtEnd).toBeLessThan(freeAtStart - 2 * MIB); // measured before the partial tree (3 MiB copied) was removed
      expect(err.value).toMatchObject({ needed, free: freeAtEnd, freeAtStart, total });
      console.log(`ENOSPC mid-apply (preflight off): ${err.message}`);

      // Recorded, booted untouched, the partial tree gone (its space freed).
      expect(s.status().lastFailure).toMatchObject({ phase: 'apply', code: 'NO_SPACE', reason: err.message });
      expect(hashTree(path.join(dir, 'current'))).toBe(booted);
      const reopened = await Sysroot.open(dir);
      expect(reopened.recovery).toEqual([]);
      expectConsistent(reopened, dir, 'after ENOSPC', before);
      expect(reopened.state().deployments.map((d) => d.id)).toEqual(['0001']);

      // An update that fits stages, finalizes and boots.
      const ok = await reopened.stage(bigUpdate(MIB), { builtins: { freeSpace: false } });
      await reboot(reopened);
      expect(reopened.status()).toMatchObject({ booted: ok.id, current: ok.id, lastFailure: null });
      expect(fs.statSync(path.join(dir, 'current/var/lib/big.bin')).size).toBe(MIB);
      expectConsistent(reopened, dir, 'after the stage that fits', before);
    });
  });

  it('preflight off: the filesystem runs out while the booted tree is copied → NO_SPACE with the figures; what was staged stays staged', async () => {
    await withFullishSysroot(async (s, dir) => {
      const staged = await s.stage(bigUpdate(MIB)); // 3 MiB copied + 1 MiB: ~1 MiB stays free
      const before = hashDeployments(s);
      const err = await stageError(s.stage({ label: 'small', files: [{ path: '/etc/motd', contents: 'hi\n' }] }, { builtins: { freeSpace: false } }));
      expect(err.code).toBe('NO_SPACE');
      expect(err.errno).toBe('ENOSPC');
      expect(err.message).toMatch(new RegExp(`^No space left writing .*\\(ENOSPC\\): the filesystem of ${esc(dir)} .* had ${FIG} free when the stage started, ${FIG} after the failed write; this stage needs about ${FIG} \\(3\\.0 MiB \\((\\d+) bytes\\) copied from the booted tree \\+ 3 bytes of new content`));
      console.log(`ENOSPC mid-copy (preflight off): ${err.message}`);

      const reopened = await Sysroot.open(dir);
      expectConsistent(reopened, dir, 'after ENOSPC in the copy', before);
      expect(reopened.status()).toMatchObject({ staged: staged.id, lastFailure: { phase: 'apply', step: 'copy', code: 'NO_SPACE' } });
      expect((await reopened.verify(staged.id)).drift).toEqual([]);
    });
  });

  it('preflight on (the default): refused before anything is written, naming bytes needed and bytes free', async () => {
    await withFullishSysroot(async (s, dir) => {
      const before = hashDeployments(s);
      const err = await stageError(s.stage(bigUpdate(6 * MIB)));
      expect(err.code).toBe('NO_SPACE');
      expect(err.errno).toBeUndefined(); // not from the filesystem: from the estimate
      const m = new RegExp(`^Not enough free space to stage: ${FIG} needed \\(3\\.0 MiB \\((\\d+) bytes\\) copied from the booted tree \\+ 6\\.0 MiB \\(6291456 bytes\\) of new content \\+ .* of manifest\\), ${FIG} free on the filesystem of ${esc(dir)}$`).exec(err.message);
      expect(m, err.message).not.toBeNull();
      const [needed, copied, free] = m!.slice(1).map(Number) as [number, number, number];
      expect(copied).toBeGreaterThanOrEqual(3 * MIB);
      expect(err.value).toEqual({ needed, free });
      expect(needed).toBeGreaterThan(free);
      expect(free).toBeGreaterThan(4 * MIB); // nothing was written first
      console.log(`preflight: ${err.message}`);
      expect(s.status().lastFailure).toMatchObject({ phase: 'validate', code: 'NO_SPACE' });
      expect(fs.readdirSync(path.join(dir, 'work'))).toEqual([]);
      expectConsistent(await Sysroot.open(dir), dir, 'after the preflight refused', before);
    });
  });
});
