import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree, tempSysroot } from '../../src/testing/index.js';
import type { StageProgress } from '../../src/stage/stage.js';
import { progressBar } from '../../src/cli/progress.js';

describe('stage progress', () => {
  it('reports entries done of total and bytes, phase by phase', async () => {
    const tree: Record<string, string> = {};
    for (let i = 0; i < 2500; i++) tree[`usr/share/doc/f${i}`] = 'x'.repeat(i % 50);
    for (let i = 0; i < 20; i++) tree[`etc/conf/c${i}`] = 'y'.repeat(i);
    const t = await tempSysroot({ tree });
    try {
      const events: StageProgress[] = [];
      const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello' }] }, { onProgress: (p) => events.push({ ...p }) });
      const copy = events.filter((e) => e.phase === 'copy');
      expect(copy.length).toBeGreaterThanOrEqual(3);
      const last = copy.at(-1)!;
      expect(last.total).toBe(last.done);
      // 2520 files plus the usr, usr/share, usr/share/doc, etc, etc/conf directories and var/ (the shared /var's empty mount point).
      expect(last.done).toBe(2526);
      // The copy's bytes are those it copied: the files linked under usr/ are not looked at.
      const usrBytes = Array.from({ length: 2500 }, (_, i) => i % 50).reduce((a, b) => a + b, 0);
      const etcBytes = Array.from({ length: 20 }, (_, i) => i).reduce((a, b) => a + b, 0);
      expect(last.bytes).toBe(etcBytes);
      // The deployment's size is the whole tree's (the update's 5 bytes added).
      expect(r.bytes).toBe(usrBytes + etcBytes + 5);
      for (let i = 1; i < copy.length; i++) expect(copy[i]!.done).toBeGreaterThanOrEqual(copy[i - 1]!.done);
      // Phases in order, none returned to: the runs of equal phases, as they came.
      const phases = events.map((e) => e.phase).filter((ph, i, all) => i === 0 || all[i - 1] !== ph);
      expect(phases).toEqual(['plan', 'copy', 'apply', 'manifest', 'validate', 'sync', 'commit']);
      // Each step is entered (done 0, announced) once.
      const entered = events.filter((e) => e.done === 0 && e.bytes === 0).map((e) => e.phase);
      expect(entered.filter((ph, i) => entered.indexOf(ph) !== i)).toEqual([]);
      expect(events.find((e) => e.phase === 'apply' && e.done === 1)?.bytes).toBe(5);
    } finally {
      t.cleanup();
    }
  });

  it('an AbortSignal cancels the copy: ABORTED, the work removed, booted untouched, the failure recorded', async () => {
    const tree: Record<string, string> = {};
    for (let i = 0; i < 2500; i++) tree[`usr/share/doc/f${i}`] = `f${i}`;
    const t = await tempSysroot({ tree });
    try {
      const before = hashTree(t.sysroot.treePath('0001'));
      const ac = new AbortController();
      const p = t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello' }] }, { signal: ac.signal, onProgress: (e) => e.phase === 'copy' && e.done > 0 && ac.abort() });
      await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
      const s = t.sysroot.status();
      expect(s.staged).toBeNull();
      expect(s.lastFailure).toMatchObject({ phase: 'apply' });
      expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
      expect(hashTree(t.sysroot.treePath('0001'))).toBe(before);
      // The next stage goes through.
      await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello' }] });
    } finally {
      t.cleanup();
    }
  });

  it('announces each step as it starts: manifest before the manifest is written, sync and commit before the tree moves', async () => {
    const t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    try {
      const work = path.join(t.dir, 'work', '0002');
      const seen: string[] = [];
      await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello' }] }, {
        onProgress: (p) => {
          if (p.done !== 0) return;
          const has = (f: string): string => (fs.existsSync(path.join(work, f)) ? f : `no ${f}`);
          seen.push(`${p.phase}: ${has('tree')}, ${has('manifest.ndjson')}`);
        },
      });
      // The real sequence, as the caller sees it: each step is entered once.
      expect(seen).toEqual([
        'plan: no tree, no manifest.ndjson',
        'copy: tree, no manifest.ndjson',
        'apply: tree, no manifest.ndjson',
        'manifest: tree, no manifest.ndjson',
        'validate: tree, manifest.ndjson',
        'sync: tree, manifest.ndjson',
        'commit: tree, manifest.ndjson',
      ]);
    } finally {
      t.cleanup();
    }
  });

  it('draws a bar only on a terminal', () => {
    let drawn = '';
    const tty = progressBar({ out: () => {}, err: (t) => void (drawn += t), errIsTty: true, env: {} });
    tty.update({ phase: 'copy', done: 50, total: 100, bytes: 2_000_000 });
    tty.done();
    expect(drawn).toContain('[###############...............] copy     50/100 2.0 MB');
    let quiet = '';
    const pipe = progressBar({ out: () => {}, err: (t) => void (quiet += t), errIsTty: false, env: {} });
    pipe.update({ phase: 'copy', done: 50, total: 100, bytes: 1 });
    pipe.done();
    expect(quiet).toBe('');
  });
});
