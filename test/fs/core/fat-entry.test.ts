import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FatProbe, onFat, syncRenamedOnFat, type FatSources } from '../../../src/fs/core/fat-entry.js';

describe('syncRenamedOnFat: only on FAT, told without statfs (whose first call on a vfat mount reads the whole FAT)', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-fat-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a directory off FAT (this machine\'s temp directory, /proc) is not FAT; a missing one neither', () => {
    expect(onFat(dir)).toBe(false);
    expect(onFat('/proc')).toBe(false);
    expect(onFat(path.join(dir, 'none'))).toBe(false);
  });

  it('does nothing to a renamed file off FAT, and throws nothing for one that is gone', () => {
    fs.writeFileSync(path.join(dir, 'f'), 'x');
    expect(() => syncRenamedOnFat(path.join(dir, 'f'))).not.toThrow();
    expect(() => syncRenamedOnFat(path.join(dir, 'none', 'f'))).not.toThrow();
  });
});

describe('FatProbe: mountinfo once per device, statfs never on a device mountinfo named FAT', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-fatprobe-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Sources whose answers a test sets, counting the calls. */
  function sources(type: string | undefined, statfsFat: boolean) {
    const s = { type, statfsFat, mountinfoReads: 0, statfsCalls: 0 };
    const src: FatSources = {
      typeOfDevice: () => (s.mountinfoReads++, s.type),
      statfsSaysFat: () => (s.statfsCalls++, s.statfsFat),
    };
    return { s, src };
  }

  it('a device mountinfo names vfat: FAT, mountinfo read once, statfs never (its first call reads the whole FAT)', () => {
    const { s, src } = sources('vfat', false);
    const probe = new FatProbe(src);
    for (let i = 0; i < 5; i++) expect(probe.onFat(dir)).toBe(true);
    expect(s.mountinfoReads).toBe(1);
    expect(s.statfsCalls).toBe(0);
  });

  it('a device mountinfo names ext4: not FAT, mountinfo read once, statfs asked again each time (a reused device number that is FAT now is caught)', () => {
    const { s, src } = sources('ext4', false);
    const probe = new FatProbe(src);
    expect(probe.onFat(dir)).toBe(false);
    expect(probe.onFat(dir)).toBe(false);
    s.statfsFat = true;
    expect(probe.onFat(dir)).toBe(true);
    expect(s.mountinfoReads).toBe(1);
    expect(s.statfsCalls).toBe(2);
  });

  it('a device mountinfo does not name: statfs decides', () => {
    const { s, src } = sources(undefined, true);
    expect(new FatProbe(src).onFat(dir)).toBe(true);
    expect(s.statfsCalls).toBe(1);
  });

  it('a missing directory: not FAT, nothing read', () => {
    const { s, src } = sources('vfat', true);
    expect(new FatProbe(src).onFat(path.join(dir, 'none'))).toBe(false);
    expect(s.mountinfoReads + s.statfsCalls).toBe(0);
  });
});
