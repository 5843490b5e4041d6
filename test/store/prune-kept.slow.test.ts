/**
 * Kept merge copies (kept/ID: the local versions the /etc merge into deployment ID kept
 * aside) live as long as deployment ID: prune removes them with it, recovery finishes a
 * removal a crash interrupted between the tree and the kept copies, and the kept copies
 * of deployments still listed survive both.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { copySysroot, countMutations, crashAt, requireDist, runChild } from '../helpers/crash.js';
import { readState } from '../helpers/invariants.js';
import { BASE_TREE, motdUpdate } from '../helpers/trees.js';

const keptIds = (dir: string): string[] => (fs.existsSync(path.join(dir, 'kept')) ? fs.readdirSync(path.join(dir, 'kept')).sort() : []);
const trash = (dir: string): string[] => (fs.existsSync(path.join(dir, 'trash')) ? fs.readdirSync(path.join(dir, 'trash')) : []);

/**
 * Three good updates, each over a local edit of the booted etc/motd that the update
 * overwrites: deployments 0002, 0003 and 0004 each have kept/ID/etc/motd. Then
 * `prune --keep 1` removes 0001 and 0002 (0003 is the rollback, 0004 current).
 */
async function threeMergedUpdates(s: Sysroot): Promise<void> {
  for (const n of ['A', 'B', 'C']) {
    fs.writeFileSync(path.join(s.treePath(s.status().booted!), 'etc/motd'), `local edit before ${n}\n`);
    await s.stage(motdUpdate(n));
    await reboot(s);
    await s.markGood();
  }
}

describe('kept merge copies are removed with their deployment', () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());
  beforeAll(() => requireDist());

  it('prune removes kept/ID of each deployment it removes; kept copies of listed deployments survive', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    const s = t.sysroot;
    await threeMergedUpdates(s);
    expect(keptIds(t.dir)).toEqual(['0002', '0003', '0004']);

    const r = await s.prune({ keep: 1 });
    expect(r.removed.sort()).toEqual(['0001', '0002']);
    expect(keptIds(t.dir)).toEqual(['0003', '0004']);
    expect(fs.readFileSync(path.join(t.dir, 'kept/0003/etc/motd'), 'utf8')).toBe('local edit before B\n');
    expect(fs.readFileSync(path.join(t.dir, 'kept/0004/etc/motd'), 'utf8')).toBe('local edit before C\n');
    expect(trash(t.dir)).toEqual([]);
    // The last merge (into 0004, still listed) still names its kept copy.
    expect(s.status().lastMerge).toMatchObject({ id: '0004', conflicts: [{ path: 'etc/motd', kept: path.join(t.dir, 'kept/0004/etc/motd') }] });
  });

  it('a crash between removing the tree and its kept copies leaves nothing stale after recovery', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await threeMergedUpdates(t.sysroot);
    // Killed right after deploy/0002 moved to trash/, before kept/0002 follows it.
    crashAt(t.dir, 'prune', /^rename .*\/trash\/0002-[0-9a-f]+$/);
    expect(readState(t.dir).deployments.map((d) => d.id)).not.toContain('0002');
    expect(keptIds(t.dir)).toContain('0002'); // the window this test is about

    const s = await Sysroot.open(t.dir, { onWarning: () => {} });
    expect(s.recovery.join('\n')).toContain('kept/0002');
    expect(keptIds(t.dir)).toEqual(['0003', '0004']);
    expect(trash(t.dir)).toEqual([]);
    expect(fs.readFileSync(path.join(t.dir, 'kept/0004/etc/motd'), 'utf8')).toBe('local edit before C\n');
  });

  it('after a crash at any point of prune, recovery leaves exactly the kept copies of listed deployments', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await threeMergedUpdates(t.sysroot);
    const ops = countMutations(t.dir, 'prune');
    expect(ops.filter((o) => /^rename .*\/trash\/kept-0002-/.test(o))).toHaveLength(1); // prune moves kept/0002 too
    for (let n = 1; n <= ops.length; n++) {
      const where = `crash point ${n}/${ops.length} (after ${ops[n - 1]})`;
      const dir = path.join(t.scratch, `crash-${n}`);
      copySysroot(t.dir, dir);
      const k = runChild(dir, 'prune', n);
      expect(k.signal, `${where}: ${k.stderr}`).toBe('SIGKILL');
      const s = await Sysroot.open(dir, { onWarning: () => {} });
      const listed = s.state().deployments.map((d) => d.id);
      expect(keptIds(dir), where).toEqual(listed.filter((id) => id !== '0001').sort());
      expect(trash(dir), where).toEqual([]);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
