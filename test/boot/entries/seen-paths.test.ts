import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SeenPaths, unchangedSince } from '../../../src/boot/entries/seen-paths.js';

describe('SeenPaths: what a boot-entry sync read, by identity', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-seen-'));
    fs.mkdirSync(path.join(dir, 'd'));
    fs.writeFileSync(path.join(dir, 'd/f'), 'x\n');
    fs.symlinkSync('d', path.join(dir, 'link'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('keeps one check per answer: a real directory\'s stat beside its lstat, nothing under a path that is not there', () => {
    const seen = new SeenPaths();
    seen.stat(path.join(dir, 'd'));
    seen.lstat(path.join(dir, 'd'));
    seen.stat(path.join(dir, 'link'));
    seen.lstat(path.join(dir, 'link'));
    seen.stat(path.join(dir, 'gone'));
    seen.lstat(path.join(dir, 'gone/vmlinuz'));
    expect(seen.entries(dir).map(([k]) => k)).toEqual(['ld', 'slink', 'llink', 'sgone']);
    expect(seen.entries('/elsewhere').map(([k]) => k)[0]).toBe(`l${dir}/d`);
    expect(unchangedSince(seen.entries(dir), dir)).toBe(true);
  });

  it('every change shows: a write in place, a replacement, an entry added to a listed directory, a symlink retargeted, a path appearing', () => {
    const changes: [string, () => void][] = [
      ['write in place', () => fs.appendFileSync(path.join(dir, 'd/f'), 'y\n')],
      ['chmod', () => fs.chmodSync(path.join(dir, 'd/f'), 0o600)],
      ['replaced', () => (fs.writeFileSync(path.join(dir, 'new'), 'x\n'), fs.renameSync(path.join(dir, 'new'), path.join(dir, 'd/f')))],
      ['entry added', () => fs.writeFileSync(path.join(dir, 'd/g'), '')],
      ['symlink retargeted', () => (fs.rmSync(path.join(dir, 'link')), fs.symlinkSync('d/f', path.join(dir, 'link')))],
      ['appears', () => fs.mkdirSync(path.join(dir, 'gone'))],
    ];
    for (const [what, change] of changes) {
      const seen = new SeenPaths();
      seen.lstat(path.join(dir, 'd/f'));
      seen.stat(path.join(dir, 'd'));
      seen.lstat(path.join(dir, 'link'));
      seen.stat(path.join(dir, 'gone'));
      const entries = seen.entries(dir);
      expect(unchangedSince(entries, dir), what).toBe(true);
      change();
      expect(unchangedSince(entries, dir), what).toBe(false);
    }
  });

  it('a path whose identity changed during the sync makes it unstable (no record of it)', () => {
    const seen = new SeenPaths();
    seen.lstat(path.join(dir, 'd/f'));
    expect(seen.stable).toBe(true);
    fs.appendFileSync(path.join(dir, 'd/f'), 'y\n');
    seen.lstat(path.join(dir, 'd/f'));
    expect(seen.stable).toBe(false);
  });
});
