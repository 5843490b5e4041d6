/**
 * Recovery at open, or left to the first write (recoverOnOpen: false, as the CLI opens for
 * its one verb): the write recovers under its lock before it plans, so nothing is lost and
 * the notes come once.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const LEFTOVER = '.stagedroot-tmp-4242-0123456789ab';

describe('recovery at open, or at the first write', () => {
  it('recoverOnOpen: false opens without the lock or any write; the first write recovers, its notes once', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const left = path.join(t.dir, LEFTOVER);
    fs.writeFileSync(left, 'half\n');
    const mutations: string[] = [];
    const warnings: string[] = [];
    const s = await Sysroot.open(t.dir, { recoverOnOpen: false, faults: { afterMutation: (op, p) => void mutations.push(`${op} ${path.relative(t!.dir, p)}`) }, onWarning: (m) => void warnings.push(m) });
    expect(mutations).toEqual([]);
    expect(s.recovery).toEqual([]);
    expect(fs.existsSync(left)).toBe(true);
    await s.pin('0001');
    expect(fs.existsSync(left)).toBe(false);
    expect(warnings.filter((w) => w.startsWith('recovery: '))).toEqual([`recovery: removed temp file ${LEFTOVER}`]);
  });

  it('by default the open recovers (a handle kept for reading reads a recovered sysroot)', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const left = path.join(t.dir, LEFTOVER);
    fs.writeFileSync(left, 'half\n');
    const s = await Sysroot.open(t.dir);
    expect(fs.existsSync(left)).toBe(false);
    expect(s.recovery).toEqual([`removed temp file ${LEFTOVER}`]);
  });

  it("a CLI verb that writes recovers once, under its own lock: the note on stderr once, the leftover gone", async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const left = path.join(t.dir, LEFTOVER);
    fs.writeFileSync(left, 'half\n');
    const r = await cli(['pin', '0001', '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
    expect(fs.existsSync(left)).toBe(false);
    expect(r.err.split('\n').filter((l) => l.includes('recovery: '))).toEqual([`stagedroot: warning: recovery: removed temp file ${LEFTOVER}`]);
  });
});
