/**
 * Every writer runs through runOperation: the lock, recovery, then the operation. The
 * operations that create a sysroot (init, adopt) start from no state: nothing to recover.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../src/context.js';
import { acquireLock } from '../../src/fs/lock/writer-lock.js';
import { runOperation } from '../../src/operations/run-operation.js';
import { Sysroot } from '../../src/sysroot.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-run-op-'));
  dirs.push(d);
  return d;
}

describe('runOperation', () => {
  it('a creating operation makes the sysroot directory, holds the lock under its name and starts from no state', async () => {
    const dir = path.join(scratch(), 'new');
    const ctx = makeContext(dir, {});
    const seen = await runOperation(ctx, 'init', 0, (s) => ({ state: s, owner: JSON.parse(fs.readFileSync(path.join(dir, 'lock', 'owner.json'), 'utf8')).operation }));
    expect(seen).toEqual({ state: null, owner: 'init' });
    expect(fs.readdirSync(dir)).toEqual([]); // the lock released, nothing else left
  });

  it('init waits for the lock like every writer: BUSY while another process holds it, writing nothing', async () => {
    const dir = path.join(scratch(), 'new');
    fs.mkdirSync(dir);
    const held = await acquireLock(dir, { operation: 'someone else' });
    try {
      await expect(Sysroot.init(dir)).rejects.toMatchObject({ code: 'BUSY' });
      expect(fs.readdirSync(dir)).toEqual(['lock']);
    } finally {
      held.release();
    }
    const s = await Sysroot.init(dir);
    expect(s.status().current).toBe('0001');
  });

  it('is the only place in src/ that takes the writer lock', () => {
    const src = path.join(import.meta.dirname, '../../src');
    const takers = fs
      .readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !f.startsWith('fs/lock/'))
      .filter((f) => /\bacquireLock\b/.test(fs.readFileSync(path.join(src, f), 'utf8')));
    expect(takers).toEqual(['operations/run-operation.ts']);
  });
});
