import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isStagedrootError } from '../../../src/errors.js';
import { DurableFs } from '../../../src/fs/trees/durable.js';
import { countingHook } from '../../../src/testing/faults.js';
import { journalFile, markProgress, parseJournal, readJournal, writeJournal, type LiveJournal } from '../../../src/activation/live/journal.js';
import { prepareJournal } from '../../../src/activation/live/prepare.js';

let base: string;
let live: string;
let staged: string;
let dir: string;
beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-live-journal-'));
  live = path.join(base, 'live');
  staged = path.join(base, 'staged');
  dir = path.join(base, 'sysroot', 'live-apply');
  fs.mkdirSync(path.join(base, 'sysroot'));
  for (const t of [live, staged]) fs.mkdirSync(path.join(t, 'etc', 'ssh'), { recursive: true });
  fs.writeFileSync(path.join(live, 'etc/motd'), 'old motd\n', { mode: 0o640 });
  fs.chownSync(path.join(live, 'etc/motd'), 0, 4);
  execFileSync('setfattr', ['-n', 'security.selinux', '-v', 'system_u:object_r:etc_t:s0', path.join(live, 'etc/motd')]);
  execFileSync('setfattr', ['-n', 'user.note', '-v', 'kept', path.join(live, 'etc/motd')]);
  fs.symlinkSync('../usr/share/zoneinfo/UTC', path.join(live, 'etc/localtime'));
  fs.mkdirSync(path.join(live, 'etc/old.d'), { mode: 0o750 });
  fs.writeFileSync(path.join(live, 'etc/old.d/a.conf'), 'a\n');
  fs.writeFileSync(path.join(staged, 'etc/motd'), 'new motd\n');
  fs.mkdirSync(path.join(staged, 'etc/new.d/deep'), { recursive: true });
  fs.writeFileSync(path.join(staged, 'etc/new.d/deep/x.conf'), 'x\n');
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

const prepare = (dfs = new DurableFs()): LiveJournal =>
  prepareJournal({
    dfs,
    dir,
    deployment: '0002',
    source: staged,
    root: live,
    changes: [
      { path: 'etc/motd', change: 'write' },
      { path: 'etc/localtime', change: 'remove' },
      { path: 'etc/old.d', change: 'remove' },
      { path: 'etc/new.d/deep/x.conf', change: 'write' },
    ],
    daemonReload: true,
    actions: [{ type: 'Reload', reload: { serviceName: 'crio.service' } }, { type: 'Restart', restart: { serviceName: 'sshd.service' } }],
  });

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    if (isStagedrootError(err, 'LIVE_JOURNAL_CORRUPT')) return err.message;
    throw err;
  }
  throw new Error('not refused');
};

describe('the live-apply intent journal', () => {
  it('records every path with its before-image (mode, owner, xattrs with security.selinux, a copy beside it) and reads back equal', () => {
    const j = prepare();
    expect(readJournal(dir)).toEqual(j);
    // Parents before children, the missing parents of a written path added as writes.
    expect(j.entries.map((e) => [e.path, e.change, e.before.kind])).toEqual([
      ['etc/localtime', 'remove', 'symlink'],
      ['etc/motd', 'write', 'file'],
      ['etc/new.d', 'write', 'absent'],
      ['etc/new.d/deep', 'write', 'absent'],
      ['etc/new.d/deep/x.conf', 'write', 'absent'],
      ['etc/old.d', 'remove', 'dir'],
    ]);
    const motd = j.entries[1]!.before;
    expect(motd).toMatchObject({ kind: 'file', mode: 0o640, uid: 0, gid: 4, size: 9 });
    if (motd.kind !== 'file') throw new Error('unreachable');
    expect(motd.xattrs.map((x) => [x.name, Buffer.from(x.value, 'base64').toString()])).toEqual([
      ['security.selinux', 'system_u:object_r:etc_t:s0'],
      ['user.note', 'kept'],
    ]);
    const img = path.join(dir, motd.image);
    expect(fs.readFileSync(img, 'utf8')).toBe('old motd\n');
    expect(fs.statSync(img).mode & 0o7777).toBe(0o640);
    expect(execFileSync('getfattr', ['--absolute-names', '-n', 'security.selinux', '--only-values', img], { encoding: 'utf8' })).toBe('system_u:object_r:etc_t:s0');
    expect(j.entries[0]!.before).toMatchObject({ kind: 'symlink', target: '../usr/share/zoneinfo/UTC' });
    const old = j.entries[5]!.before;
    expect(old).toMatchObject({ kind: 'dir', mode: 0o750, recursive: true });
    if (old.kind !== 'dir') throw new Error('unreachable');
    expect(fs.readFileSync(path.join(dir, old.image, 'a.conf'), 'utf8')).toBe('a\n');
    // Nothing in the running root changed.
    expect(fs.readFileSync(path.join(live, 'etc/motd'), 'utf8')).toBe('old motd\n');
    expect(fs.existsSync(path.join(live, 'etc/new.d'))).toBe(false);
    expect(fs.statSync(journalFile(dir)).mode & 0o777).toBe(0o600);
  });

  it('writes the journal durably: each image, then journal.json by temp + rename, and progress markers the same way', () => {
    const hook = countingHook();
    const j = prepare(new DurableFs(hook));
    const renames = hook.ops.filter((o) => o.startsWith('rename '));
    expect(renames.at(-1)).toBe(`rename ${journalFile(dir)}`);
    // Every image is in place before the journal names it.
    const lastImage = Math.max(...hook.ops.map((o, i) => (o.includes(`${dir}/before/`) ? i : -1)));
    expect(lastImage).toBeGreaterThan(0);
    expect(lastImage).toBeLessThan(hook.ops.lastIndexOf(`rename ${journalFile(dir)}`));
    const p1 = markProgress(new DurableFs(), dir, j, { filesWritten: true });
    const p2 = markProgress(new DurableFs(), dir, p1, { daemonReloaded: true, actionsDone: 1 });
    expect(readJournal(dir)?.progress).toEqual({ filesWritten: true, daemonReloaded: true, actionsDone: 1 });
    expect(p2.entries).toEqual(j.entries);
    expect(fs.readdirSync(dir).sort()).toEqual(['before', 'journal.json']);
  });

  it('refuses a torn or truncated journal.json with LIVE_JOURNAL_CORRUPT, at every length', () => {
    prepare();
    const text = fs.readFileSync(journalFile(dir), 'utf8');
    for (let n = 0; n < text.length - 1; n += Math.max(1, Math.floor(text.length / 97))) {
      fs.writeFileSync(journalFile(dir), text.slice(0, n));
      expect(refusal(() => readJournal(dir)), `cut at ${n}`).toMatch(/cannot be trusted: not (valid JSON|a live-apply journal)/);
    }
    // A journal that parses but is not whole: an entry gone from the middle of a list is not detectable, a field is.
    const j = JSON.parse(text) as LiveJournal;
    const bad = (v: unknown): string => refusal(() => parseJournal(JSON.stringify(v), journalFile(dir)));
    expect(bad({ ...j, progress: { filesWritten: true, daemonReloaded: false, actionsDone: 1 } })).toMatch(/an action done before the files and the daemon-reload/);
    expect(bad({ ...j, progress: { ...j.progress, actionsDone: 3 } })).toMatch(/progress\.actionsDone: more than the 2 actions/);
    expect(bad({ ...j, entries: [{ ...j.entries[0]!, path: '../etc/shadow' }] })).toMatch(/entries\[0\]\.path/);
    expect(bad({ ...j, version: 2 })).toMatch(/version/);
    expect(bad({ ...j, entries: [j.entries[0], j.entries[0]] })).toMatch(/listed twice/);
  });

  it('refuses a journal whose before-image is missing or not the bytes recorded', () => {
    const j = prepare();
    const motd = j.entries[1]!.before;
    if (motd.kind !== 'file') throw new Error('unreachable');
    fs.writeFileSync(path.join(dir, motd.image), 'old motD\n');
    expect(refusal(() => readJournal(dir))).toMatch(/before-image before\/1 of etc\/motd is not the bytes recorded/);
    fs.rmSync(path.join(dir, motd.image));
    expect(refusal(() => readJournal(dir))).toMatch(/before-image before\/1 of etc\/motd is missing/);
  });

  it('never writes a journal it could not read back, and refuses to prepare over an unrecovered one', () => {
    const j = prepare();
    expect(() => writeJournal(new DurableFs(), dir, { ...j, progress: { ...j.progress, actionsDone: 9 } })).toThrow();
    expect(readJournal(dir)).toEqual(j);
    expect(() => prepare()).toThrow(/already in .*recover it/);
  });

  it('a progress marker on a journal this process wrote checks the progress it changes; a journal changed since, or not written here, is checked whole', () => {
    const j = prepare();
    expect(() => markProgress(new DurableFs(), dir, j, { actionsDone: 1 })).toThrow(/an action done before the files/);
    expect(() => markProgress(new DurableFs(), dir, j, { filesWritten: true, actionsDone: 3 })).toThrow(/more than the 2 actions/);
    expect(() => markProgress(new DurableFs(), dir, j, { actionsDone: -1 })).toThrow();
    expect(readJournal(dir)).toEqual(j);
    const p1 = markProgress(new DurableFs(), dir, j, { filesWritten: true });
    expect(readJournal(dir)).toEqual(p1);
    // Changed in place after its write: checked whole, refused.
    (p1.entries as unknown[]).push(p1.entries[0]);
    expect(() => markProgress(new DurableFs(), dir, p1, { daemonReloaded: true })).toThrow(/listed twice/);
    // Not written here (read back, or made by hand): the whole journal is checked.
    const read = readJournal(dir)!;
    expect(() => markProgress(new DurableFs(), dir, { ...read, entries: [read.entries[0]!, read.entries[0]!] }, { actionsDone: 1 })).toThrow(/listed twice/);
    const p2 = markProgress(new DurableFs(), dir, read, { daemonReloaded: true, actionsDone: 2 });
    expect(readJournal(dir)).toEqual(p2);
  });

  it('starts again over images an earlier prepare left without a journal', () => {
    fs.mkdirSync(path.join(dir, 'before', '0'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'before', '7'), 'leftover');
    const j = prepare();
    expect(fs.readdirSync(path.join(dir, 'before')).sort()).toEqual(['0', '1', '5']);
    expect(readJournal(dir)).toEqual(j);
  });

  it('refuses, before writing, a written path whose parent is not a directory in the running root', () => {
    fs.writeFileSync(path.join(live, 'etc/new.d'), 'a file\n');
    expect(() => prepare()).toThrow(/parent etc\/new.d is not a directory in the running root/);
    expect(fs.existsSync(journalFile(dir))).toBe(false);
  });
});
