/**
 * A stage records the new deployment's kernel hashes (deploy/ID/kernel-hashes.json) from its
 * manifest, so the entry sync of the step that makes it current (finalize, apply-live's
 * commit) neither opens its manifest nor writes that cache.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { makeContext } from '../../src/context.js';
import { syncBootEntries } from '../../src/boot/entries/sync.js';
import { findKernel } from '../../src/boot/entries/kernels.js';
import type { BaseState } from '../../src/state/schema.js';
import { tempSysrootWithBootDir } from '../helpers/boot.js';

let cleanup: (() => void) | undefined;
afterEach(() => cleanup?.());

it('a stage with a boot directory records the staged kernel hashes; the sync that makes it current writes no cache', async () => {
  const made = await tempSysrootWithBootDir();
  cleanup = made.cleanup;
  const t = made.t;
  const r = await t.sysroot.stage({ label: 'k2', files: [{ path: '/usr/lib/modules/6.2.0-1/vmlinuz', contents: 'kernel 6.2.0-1\n' }, { path: '/etc/motd', contents: 'hi\n' }] });
  const ctx = makeContext(t.dir);
  const cache = ctx.layout.kernelHashes(r.id);
  expect(fs.existsSync(cache), 'the staged deployment has its kernel hashes').toBe(true);
  const recorded = JSON.parse(fs.readFileSync(cache, 'utf8')) as { rel: string; sha256: string }[];
  const k = findKernel(t.sysroot.treePath(r.id))!;
  expect(recorded.map((c) => c.rel)).toEqual([k.kernelPath]);
  // The entries with the staged deployment current, as its finalize writes them: its cache is read, not written.
  const before: BaseState = t.sysroot.state();
  const after: BaseState = { ...before, current: r.id, rollback: before.current, staged: null };
  const written: string[] = [];
  syncBootEntries(makeContext(t.dir, { faults: { afterMutation: (op, p) => void written.push(`${op} ${path.relative(t.dir, p)}`) } }), after);
  expect(written.some((w) => w.includes(`deploy/${r.id}/`)), written.join('\n')).toBe(false);
  expect(written.some((w) => w.includes('stagedroot-') || w.includes('loader')), `the entries were written: ${written.join(', ')}`).toBe(true);
});
