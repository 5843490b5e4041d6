import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../../src/context.js';
import { parseBootEntry } from '../../../src/state/boot-entry-text.js';
import type { BaseState } from '../../../src/state/schema.js';
import { syncBootEntries, type BootLoader } from '../../../src/boot/entries/sync.js';
import { STAMP_MARGIN_MS } from '../../../src/boot/entries/record.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { crashEverySync, KERNEL_TREE } from '../../helpers/boot.js';

let t: TempSysroot | undefined;
let boot: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (boot) fs.rmSync(boot, { recursive: true, force: true });
  t = boot = undefined;
});

/** A clock far enough ahead that every stamp on disk is older than the record's margin (else no record is made). */
const AHEAD = () => new Date(Date.now() + 10 * STAMP_MARGIN_MS);

/** Two deployments (0002 current, 0001 the rollback), entries written; the record is not there yet. */
async function setUp(bootLoader: BootLoader = 'bls'): Promise<string> {
  boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-record-'));
  t = await tempSysroot({ tree: KERNEL_TREE, bootDir: boot, bootLoader, kernelArguments: ['root=LABEL=root', 'rw'] });
  await t.sysroot.stage({ label: 'two', files: [{ path: '/etc/motd', contents: 'hi\n' }] });
  await t.sysroot.finalize();
  return t.dir;
}

/** One sync of the state (or `s`), returning the mutating calls it made. */
function sync(s?: BaseState, now = AHEAD): string[] {
  const ops: string[] = [];
  const ctx = makeContext(t!.dir, { now, faults: { afterMutation: (op, p) => void ops.push(`${op} ${path.relative(t!.dir, p)}`) } });
  syncBootEntries(ctx, s ?? t!.sysroot.state());
  return ops;
}

const RECORD = 'boot-entries.json';
const writesRecord = (ops: string[]) => ops.some((o) => o.startsWith('rename') && o.endsWith(RECORD));

/** A full sync after a change: the record goes first (before any write to the boot directory), and a new one is made once nothing is left to write. */
function expectFullSync(ops: string[]): void {
  expect(ops[0], ops.join(', ')).toBe(`unlink ${RECORD}`);
}

/** Sync until it skips: the record is made by the sync that writes nothing; the next one skips. */
function settle(s?: BaseState): void {
  for (let i = 0; i < 3; i++) if (sync(s).length === 0) return;
  throw new Error('the sync never skipped');
}

/** Every entry file the bootloader reads, by name, and what the boot directory holds (inode and mtime of each path). */
function bootDirSnapshot(): string {
  const out: string[] = [];
  for (const rel of fs.readdirSync(boot!, { recursive: true }) as string[]) {
    const st = fs.lstatSync(path.join(boot!, rel));
    out.push(`${rel} ${st.ino} ${st.mtimeMs} ${st.ctimeMs}`);
  }
  return out.sort().join('\n');
}

function entryOf(id: string): Record<string, string> {
  return parseBootEntry(fs.readFileSync(path.join(boot!, 'loader', 'entries', `stagedroot-${id}.conf`), 'utf8'));
}

describe('the record of the last boot-entry sync (boot-entries.json)', () => {
  it('is made by a sync that found nothing to write; the next syncs skip: no write anywhere, the boot directory untouched', async () => {
    await setUp();
    const first = sync();
    expect(first.filter((o) => !o.endsWith(RECORD) && !o.includes('.stagedroot-tmp-')), 'nothing but the record').toEqual([]);
    expect(writesRecord(first)).toBe(true);
    const before = bootDirSnapshot();
    const recordIno = fs.statSync(path.join(t!.dir, RECORD)).ino;
    for (let i = 0; i < 3; i++) expect(sync()).toEqual([]);
    expect(bootDirSnapshot()).toBe(before);
    expect(fs.statSync(path.join(t!.dir, RECORD)).ino).toBe(recordIno);
    // open (recovery) takes the same path.
    const warnings: string[] = [];
    const { Sysroot } = await import('../../../src/sysroot.js');
    await Sysroot.open(t!.dir, { now: AHEAD, onWarning: (w) => warnings.push(w) });
    expect(warnings).toEqual([]);
    expect(bootDirSnapshot()).toBe(before);
  });

  it('is not made while a stamp it saw is younger than the margin (a later change could keep it)', async () => {
    await setUp();
    const now = () => new Date();
    const ops = sync(undefined, now);
    expect(writesRecord(ops)).toBe(false);
    expect(fs.existsSync(path.join(t!.dir, RECORD))).toBe(false);
    // A clock that went back past the record's sync: not trusted.
    settle();
    expectFullSync(sync(undefined, () => new Date(Date.now() - 60_000)));
  });

  it('a new kernel dropped into a deployment\'s tree: full sync, the entry boots it', async () => {
    await setUp();
    settle();
    const tree = t!.sysroot.treePath('0002');
    fs.mkdirSync(path.join(tree, 'usr/lib/modules/6.9.0-1'));
    fs.writeFileSync(path.join(tree, 'usr/lib/modules/6.9.0-1/vmlinuz'), 'kernel 6.9.0-1\n');
    expectFullSync(sync());
    expect(entryOf('0002').linux).toMatch(/vmlinuz-6\.9\.0-1$/);
    settle();
    // A kernel added beside an existing version's modules (its directory was already there).
    fs.mkdirSync(path.join(tree, 'usr/lib/modules/7.0.0-1'));
    fs.writeFileSync(path.join(tree, 'usr/lib/modules/7.0.0-1/modules.dep'), '\n');
    expectFullSync(sync());
    settle();
    fs.writeFileSync(path.join(tree, 'usr/lib/modules/7.0.0-1/vmlinuz'), 'kernel 7.0.0-1\n');
    expectFullSync(sync());
    expect(entryOf('0002').linux).toMatch(/vmlinuz-7\.0\.0-1$/);
    // Debian's /vmlinuz link naming another kernel.
    settle();
    fs.symlinkSync('boot/vmlinuz-6.9.0-1', path.join(tree, 'vmlinuz'));
    expectFullSync(sync());
    expect(entryOf('0002').linux).toMatch(/vmlinuz-6\.9\.0-1$/);
  });

  it('a kernel or initramfs replaced, or rewritten in place with its size and mtime kept: full sync, a new copy', async () => {
    await setUp();
    settle();
    const tree = t!.sysroot.treePath('0001');
    const kernel = path.join(tree, 'usr/lib/modules/6.1.0-1/vmlinuz');
    const copy = () => fs.readFileSync(path.join(boot!, entryOf('0001').linux!), 'utf8');
    fs.writeFileSync(`${kernel}.new`, 'kernel 6.1.0-Y\n');
    fs.renameSync(`${kernel}.new`, kernel);
    expectFullSync(sync());
    expect(copy()).toBe('kernel 6.1.0-Y\n');
    settle();
    const st = fs.statSync(kernel);
    fs.writeFileSync(kernel, 'kernel 6.1.0-Z\n');
    fs.utimesSync(kernel, st.atime, st.mtime);
    expectFullSync(sync());
    expect(copy()).toBe('kernel 6.1.0-Z\n');
    settle();
    fs.appendFileSync(path.join(tree, 'usr/lib/modules/6.1.0-1/initramfs.img'), 'more\n');
    expectFullSync(sync());
    expect(fs.readFileSync(path.join(boot!, entryOf('0001').initrd!), 'utf8')).toBe('initramfs 6.1.0-1\nmore\n');
  });

  it('an entry file edited or deleted, the loader symlink moved, a stray file in the boot directory: full sync puts the entries back', async () => {
    await setUp();
    settle();
    const good = bootDirSnapshot();
    const entriesDir = path.join(boot!, 'loader', 'entries');
    const file = path.join(entriesDir, 'stagedroot-0002.conf');
    const text = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, text.replace('rw', 'ro'));
    expectFullSync(sync());
    expect(fs.readFileSync(file, 'utf8')).toBe(text);
    settle();
    fs.rmSync(file);
    expectFullSync(sync());
    expect(fs.readFileSync(file, 'utf8')).toBe(text);
    settle();
    const active = fs.readlinkSync(path.join(boot!, 'loader'));
    fs.rmSync(path.join(boot!, 'loader'));
    fs.symlinkSync(active === 'loader.0' ? 'loader.1' : 'loader.0', path.join(boot!, 'loader'));
    expectFullSync(sync());
    expect(fs.readFileSync(file, 'utf8')).toBe(text);
    settle();
    // An unused kernel copy left in stagedroot/ (the full sync removes it).
    fs.mkdirSync(path.join(boot!, 'stagedroot', 'f'.repeat(64)));
    expectFullSync(sync());
    expect(fs.existsSync(path.join(boot!, 'stagedroot', 'f'.repeat(64)))).toBe(false);
    settle();
    expect(good.split('\n').length).toBeGreaterThan(3);
  });

  it('another state (the rollback\'s order, a label, kernel arguments): full sync for it', async () => {
    await setUp();
    settle();
    const s = t!.sysroot.state();
    const rolledBack: BaseState = { ...s, current: s.rollback!, rollback: s.current };
    expectFullSync(sync(rolledBack));
    expect(Number(entryOf('0001').version)).toBeGreaterThan(Number(entryOf('0002').version));
    settle(rolledBack);
    expect(sync(rolledBack)).toEqual([]);
    const relabelled: BaseState = { ...s, deployments: s.deployments.map((d) => (d.id === '0002' ? { ...d, label: 'renamed', kernelArguments: [...(d.kernelArguments ?? []), 'quiet'] } : d)) };
    expectFullSync(sync(relabelled));
    expect(entryOf('0002')).toMatchObject({ title: 'renamed (stagedroot 0002)' });
    expect(entryOf('0002').options).toContain(' quiet ');
    // Only what no entry shows changed (tries, the good flag): still skipped.
    settle(relabelled);
    const tries: BaseState = { ...relabelled, deployments: relabelled.deployments.map((d) => ({ ...d, triesLeft: 2, good: false })) };
    expect(sync(tries)).toEqual([]);
  });

  it('a torn, foreign or garbage record is no record: full sync, then a good one', async () => {
    await setUp();
    settle();
    const file = path.join(t!.dir, RECORD);
    const good = fs.readFileSync(file, 'utf8');
    for (const bad of [good.slice(0, good.length >> 1), 'garbage', '{"v":2}', JSON.stringify({ ...JSON.parse(good), seen: 'x' }), '']) {
      fs.writeFileSync(file, bad);
      const ops = sync();
      expectFullSync(ops);
      expect(writesRecord(ops), bad.slice(0, 20)).toBe(true);
      expect(sync()).toEqual([]);
    }
  });

  it("belongs to the sysroot's path: a copy of the sysroot does not trust it (its paths are the original's)", async () => {
    await setUp();
    settle();
    const copy = `${t!.dir}-copy`;
    fs.cpSync(t!.dir, copy, { recursive: true, verbatimSymlinks: true });
    try {
      const ops: string[] = [];
      syncBootEntries(makeContext(copy, { now: AHEAD, faults: { afterMutation: (op, p) => void ops.push(`${op} ${path.relative(copy, p)}`) } }), t!.sysroot.state());
      expect(ops[0]).toBe(`unlink ${RECORD}`);
    } finally {
      fs.rmSync(copy, { recursive: true, force: true });
    }
  });

  it('GRUB\'s stagedroot.cfg and systemd-boot\'s loader.conf edited by someone else: full sync puts them back', async () => {
    await setUp('grub');
    settle();
    const cfg = path.join(boot!, 'stagedroot.cfg');
    const text = fs.readFileSync(cfg, 'utf8');
    fs.writeFileSync(cfg, '# edited\n');
    expectFullSync(sync());
    expect(fs.readFileSync(cfg, 'utf8')).toBe(text);
    t!.cleanup();
    fs.rmSync(boot!, { recursive: true, force: true });
    await setUp('systemd-boot');
    settle();
    const conf = path.join(boot!, 'loader', 'loader.conf');
    expect(fs.readFileSync(conf, 'utf8')).toBe('default stagedroot-*\n');
    fs.writeFileSync(conf, 'timeout 3\n');
    expectFullSync(sync());
    expect(fs.readFileSync(conf, 'utf8')).toBe('timeout 3\ndefault stagedroot-*\n');
    settle();
    fs.rmSync(path.join(boot!, 'loader', 'entries', 'stagedroot-0001.conf'));
    expectFullSync(sync());
    expect(fs.existsSync(path.join(boot!, 'loader', 'entries', 'stagedroot-0001.conf'))).toBe(true);
  });

  it('a crash at any point of a sync that writes leaves no record: the next sync looks, and puts the entries back', async () => {
    await setUp();
    settle();
    const before = t!.sysroot.state();
    const entries = () => {
      const dir = path.join(boot!, 'loader', 'entries');
      return fs.readdirSync(dir).sort().map((f) => `${f}\n${fs.readFileSync(path.join(dir, f), 'utf8')}`).join('\n');
    };
    const oldSet = entries();
    const after: BaseState = { ...before, current: before.rollback!, rollback: before.current };
    const points = await crashEverySync(
      t!.dir,
      after,
      (n) => {
        // The record went first (crash point 1 is its removal): nothing can skip the next sync.
        expect(fs.existsSync(path.join(t!.dir, RECORD)), `crash point ${n}`).toBe(false);
        sync(before);
        settle();
        expect(entries(), `crash point ${n}`).toBe(oldSet);
        expect(fs.readdirSync(path.join(boot!, 'stagedroot')), `crash point ${n}: kernel copies`).toHaveLength(1);
      },
      AHEAD,
    );
    expect(points).toBeGreaterThan(4);
  });
});
