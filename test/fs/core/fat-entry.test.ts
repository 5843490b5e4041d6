import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { onFat, syncRenamedOnFat } from '../../../src/fs/core/fat-entry.js';

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
