/**
 * The one write-via-temp routine (src/fs/trees/write-via-temp.ts): one temp-name scheme,
 * the file fsynced before the rename, the directory after it, and no rename after any
 * error (the temp entry removed instead).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { commitViaTemp, isLegacyTempName, isTempName, writeFileViaTemp, writeStreamViaTemp, type FileIo } from '../../../src/fs/trees/write-via-temp.js';
import { hostIo } from '../../../src/fs/trees/tree-io.js';
import { DurableFs } from '../../../src/fs/trees/durable.js';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { copyOut } from '../../../src/fs/trees/copy-entry.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-via-temp-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

type Step = 'create' | 'write' | 'finish' | 'fsync' | 'close' | 'rename' | 'fsyncDir';

/** The disk, recording each call, and failing (EIO) at `failAt`. */
function recordingIo(failAt: Step | null): { io: FileIo & { write: typeof hostIo.write }; calls: string[]; fail: (s: string) => void } {
  const calls: string[] = [];
  const fail = (step: string): void => {
    calls.push(step);
    if (step === failAt) throw Object.assign(new Error(`EIO: i/o error, ${step}`), { code: 'EIO' });
  };
  return {
    calls,
    fail,
    io: {
      create: (h, m) => (fail('create'), hostIo.create(h, m)),
      write: (fd, d, o, l) => (fail('write'), hostIo.write(fd, d, o, l)),
      fsync: (fd) => (fail('fsync'), hostIo.fsync(fd)),
      close: (fd) => {
        hostIo.close(fd); // closed either way: the error is what a close reports after it
        fail('close');
      },
      rename: (a, b) => (fail('rename'), hostIo.rename(a, b)),
      removeTree: (h) => (calls.push('removeTree'), hostIo.removeTree(h)),
      fsyncDir: (d) => (fail('fsyncDir'), hostIo.fsyncDir(d)),
    },
  };
}

const noFaults = { afterMutation: () => {} };

describe('writeFileViaTemp', () => {
  it('writes under the one temp name, fsyncs the file, renames, fsyncs the directory', () => {
    const dest = path.join(dir, 'state.json');
    fs.writeFileSync(dest, 'old\n');
    const r = recordingIo(null);
    const made: string[] = [];
    writeFileViaTemp(dest, (fd) => void r.io.write(fd, Buffer.from('new\n'), 0, 4), { io: r.io, faults: { afterMutation: (op, p) => made.push(`${op} ${path.basename(p)}`) }, durable: true, rel: 'state.json', mode: 0o640, finish: () => r.fail('finish') });
    expect(r.calls).toEqual(['create', 'write', 'finish', 'fsync', 'close', 'rename', 'fsyncDir']);
    expect(made).toHaveLength(2);
    expect(made[0]).toMatch(/^create \.stagedroot-tmp-\d+-[0-9a-f]{12}$/);
    expect(isTempName(made[0]!.slice('create '.length))).toBe(true);
    expect(made[1]).toBe('rename state.json');
    expect(fs.readFileSync(dest, 'utf8')).toBe('new\n');
    expect(fs.statSync(dest).mode & 0o777).toBe(0o640 & ~process.umask());
    expect(fs.readdirSync(dir)).toEqual(['state.json']);
  });

  for (const step of ['create', 'write', 'finish', 'fsync', 'close', 'rename'] as const) {
    it(`an I/O error at ${step}: no rename after it, the old file stays, no temp file is left, the error names the path`, () => {
      const dest = path.join(dir, 'state.json');
      fs.writeFileSync(dest, 'old\n');
      const r = recordingIo(step);
      expect(() => writeFileViaTemp(dest, (fd) => void r.io.write(fd, Buffer.from('new\n'), 0, 4), { io: r.io, faults: noFaults, durable: true, rel: 'state.json', mode: 0o644, finish: () => r.fail('finish') })).toThrow(
        expect.objectContaining({ code: 'IO', path: 'state.json', errno: 'EIO' }),
      );
      const failed = r.calls.indexOf(step);
      expect(r.calls.slice(failed + 1).filter((c) => c === 'rename' || c === 'fsyncDir')).toEqual([]);
      // After it: the descriptor closed (when one was open), the temp file removed, nothing else.
      expect(r.calls.slice(failed + 1).filter((c) => c !== 'close')).toEqual(['removeTree']);
      expect(fs.readFileSync(dest, 'utf8')).toBe('old\n');
      expect(fs.readdirSync(dir)).toEqual(['state.json']);
    });
  }

  it('a fault hook that throws after the temp file is made stops the write the same way, its descriptor closed', async () => {
    const dest = path.join(dir, 'f');
    const open = (): number => fs.readdirSync('/proc/self/fd').length;
    const before = open();
    const crash = { afterMutation: () => { throw new Error('crash'); } };
    expect(() => writeFileViaTemp(dest, () => {}, { io: hostIo, faults: crash, durable: true, rel: 'f', mode: 0o644 })).toThrow(/crash/);
    await expect(writeStreamViaTemp(dest, async () => {}, { io: hostIo, faults: crash, durable: true, rel: 'f', mode: 0o644 })).rejects.toThrow(/crash/);
    expect(open()).toBe(before);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('a stream: the same steps, and an error while the chunks come leaves nothing', async () => {
    const dest = path.join(dir, 'big');
    await writeStreamViaTemp(dest, async (fd) => void hostIo.write(fd, Buffer.from('abc'), 0, 3), { io: hostIo, faults: noFaults, durable: true, rel: 'big', mode: 0o644 });
    expect(fs.readFileSync(dest, 'utf8')).toBe('abc');
    await expect(writeStreamViaTemp(dest, async () => { throw Object.assign(new Error('EIO'), { code: 'EIO' }); }, { io: hostIo, faults: noFaults, durable: true, rel: 'big', mode: 0o644 })).rejects.toMatchObject({ code: 'IO', path: 'big' });
    expect(fs.readFileSync(dest, 'utf8')).toBe('abc');
    expect(fs.readdirSync(dir)).toEqual(['big']);
  });
});

describe('commitViaTemp', () => {
  it('commits an entry of any kind (a directory with its content), and removes all of it after an error', () => {
    const dest = path.join(dir, 'kernel');
    commitViaTemp(dest, (tmp) => {
      fs.mkdirSync(tmp);
      fs.writeFileSync(path.join(tmp, 'vmlinuz'), 'k\n');
    }, { io: hostIo, faults: noFaults, durable: true, rel: 'kernel' });
    expect(fs.readFileSync(path.join(dest, 'vmlinuz'), 'utf8')).toBe('k\n');
    expect(() => commitViaTemp(path.join(dir, 'other'), (tmp) => {
      fs.mkdirSync(tmp);
      fs.writeFileSync(path.join(tmp, 'half'), 'h\n');
      throw Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' });
    }, { io: hostIo, faults: noFaults, durable: true, rel: 'other', where: 'sysroot' })).toThrow(expect.objectContaining({ code: 'NO_SPACE' }));
    expect(fs.readdirSync(dir)).toEqual(['kernel']);
  });
});

describe('one temp-name scheme for every writer', () => {
  it('RootFs, DurableFs (files and symlinks) and copyOut all write under .stagedroot-tmp-PID-HEX', () => {
    const seen: string[] = [];
    const faults = { afterMutation: (op: string, p: string) => void ((op === 'create' || op === 'symlink' || op === 'copy') && seen.push(path.basename(p))) };
    const tree = path.join(dir, 'tree');
    fs.mkdirSync(tree);
    const root = new RootFs(tree, { faults });
    root.writeFile('a', Buffer.from('a'));
    root.symlink('l', 'a');
    const dfs = new DurableFs(faults);
    dfs.writeFileAtomic(path.join(dir, 'state.json'), '{}\n');
    dfs.replaceSymlink(path.join(dir, 'current'), 'tree');
    dfs.createViaTemp(path.join(dir, 'k'), (tmp) => fs.mkdirSync(tmp));
    fs.mkdirSync(path.join(dir, 'kept'));
    copyOut(path.join(tree, 'a'), path.join(dir, 'kept', 'a'), { faults });
    const temps = seen.filter((n) => n.startsWith('.'));
    expect(temps).toHaveLength(5); // root's file and symlink, the state file, the pointer, the kept copy
    for (const n of temps) expect(isTempName(n), n).toBe(true);
  });

  it('knows the names older versions left (for recovery), and only those', () => {
    expect(isTempName('.stagedroot-tmp-123-0123456789ab')).toBe(true);
    expect(isTempName('.stagedroot-tmp-x')).toBe(false);
    expect(isTempName('stagedroot-tmp-1-ab')).toBe(false);
    expect(isLegacyTempName('.state.json.tmp-77-0a1b2c3d')).toBe(true);
    expect(isLegacyTempName('.current.new-77-0a1b2c3d')).toBe(true);
    expect(isLegacyTempName('.stagedroot-0002.conf.tmp-77-0a1b2c3d', (t) => /^stagedroot-\d{4,}\.conf$/.test(t))).toBe(true);
    expect(isLegacyTempName('.grub.cfg.tmp-77-0a1b2c3d', (t) => t === 'stagedroot.cfg')).toBe(false);
    expect(isLegacyTempName('state.json')).toBe(false);
    expect(isLegacyTempName('.state.json.tmp-77')).toBe(false);
  });
});
