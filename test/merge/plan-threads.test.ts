/**
 * planEtcMerge is one planner for finalize (rows walked on a worker thread) and for
 * recovery (walked on the caller's thread, as recovery runs synchronously), and a small
 * etc/ is walked on the caller's thread by finalize too: the same sources give the same
 * plan every way.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { planEtcMerge } from '../../src/merge/merge.js';
import { changedRows, changedRowsUpTo } from '../../src/merge/merge-rows.js';
import { Layout } from '../../src/state/layout.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { BASE_TREE } from '../helpers/trees.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

it('plans the same merge on the caller thread as on a worker thread', async () => {
  t = await tempSysroot({ tree: { ...BASE_TREE, 'etc/app.conf': 'a=1\n', 'etc/gone.conf': 'x\n', 'etc/same.conf': 's\n' } });
  const r = await t.sysroot.stage({ version: 1, label: 'next', files: [{ path: '/etc/app.conf', contents: 'a=2\n' }, { path: '/etc/new.conf', contents: 'n\n' }] });
  const booted = path.join(t.dir, 'deploy', t.sysroot.status().booted!, 'tree');
  fs.writeFileSync(path.join(booted, 'etc/app.conf'), 'a=local\n'); // a conflict: both changed it
  fs.writeFileSync(path.join(booted, 'etc/local.conf'), 'mine\n'); // an addition, carried
  fs.unlinkSync(path.join(booted, 'etc/gone.conf')); // a removal, carried
  const layout = new Layout(t.dir);
  const onWorker = await planEtcMerge(layout, t.sysroot.status().booted!, r.id, ['etc'], { thread: 'worker' });
  const bySize = await planEtcMerge(layout, t.sysroot.status().booted!, r.id, ['etc']); // a small etc/: on the caller's thread
  const onCaller = planEtcMerge(layout, t.sysroot.status().booted!, r.id, ['etc'], { thread: 'caller' });
  expect(onWorker.actions.length).toBeGreaterThanOrEqual(2);
  expect(onWorker.conflicts.map((c) => c.path)).toEqual(['etc/app.conf']);
  expect(onCaller).toEqual(onWorker);
  expect(bySize).toEqual(onWorker);
});

it('the walk on the caller thread stops past its limit (the worker walks that directory whole)', async () => {
  t = await tempSysroot({ tree: { ...BASE_TREE, 'etc/a/1': '1\n', 'etc/a/2': '2\n', 'etc/b': 'b\n' } });
  const r = await t.sysroot.stage({ version: 1, label: 'next', files: [{ path: '/etc/b', contents: 'B\n' }] });
  const booted = t.sysroot.status().booted!;
  const layout = new Layout(t.dir);
  fs.writeFileSync(path.join(layout.tree(booted), 'etc/a/3'), 'local\n');
  const src = { dir: 'etc', baseManifest: layout.manifest(booted), newManifest: layout.manifest(r.id), liveTree: layout.tree(booted), always: [] };
  let live = 0;
  for (const _ of fs.readdirSync(path.join(layout.tree(booted), 'etc'), { recursive: true })) live++;
  const all = changedRows(src);
  expect(all.map((row) => row.p)).toContain('etc/a/3');
  expect(changedRowsUpTo(src, live + 1)).toEqual(all); // etc itself is one of the entries
  expect(changedRowsUpTo(src, live)).toBeNull();
  expect(changedRowsUpTo(src, 1)).toBeNull();
});
