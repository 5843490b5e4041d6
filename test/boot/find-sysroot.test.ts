import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { findSysroot, parseKeyValues } from '../../src/boot/find-sysroot.js';
import { Sysroot } from '../../src/sysroot.js';
import { cli } from '../helpers/cli.js';

let base: string;
let runDir: string;
let etcDir: string;
const sysroots: Record<string, string> = {};

beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-find-'));
  runDir = path.join(base, 'run');
  etcDir = path.join(base, 'etc');
  fs.mkdirSync(runDir);
  fs.mkdirSync(etcDir);
  for (const name of ['option', 'environment', 'record', 'file']) {
    sysroots[name] = path.join(base, name);
    await Sysroot.init(sysroots[name]!, { label: name });
  }
});
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

const places = () => ({ runDir, etcDir });
const writeRecord = (text: string | null) => (text === null ? fs.rmSync(path.join(runDir, 'booted'), { force: true }) : fs.writeFileSync(path.join(runDir, 'booted'), text));
const writeEnvFile = (text: string | null) => (text === null ? fs.rmSync(path.join(etcDir, 'environment'), { force: true }) : fs.writeFileSync(path.join(etcDir, 'environment'), text));

/** The label of the deployment the CLI's `status` shows: which sysroot it found. */
async function statusLabel(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const r = await cli(['status', '--json', ...args], env, places());
  expect(r.code, r.err).toBe(0);
  return (JSON.parse(r.out) as { deployments: { label: string }[] }).deployments[0]!.label;
}

describe('sysroot discovery: --sysroot, STAGEDROOT_SYSROOT, /run/stagedroot/booted, /etc/stagedroot/environment', () => {
  it('takes the first place that names one, in that order', async () => {
    writeRecord(`id=0001\nsysroot=${sysroots.record}\n`);
    writeEnvFile(`# written by stagedroot install\nSTAGEDROOT_SYSROOT=${sysroots.file}\n`);
    expect(await statusLabel(['--sysroot', sysroots.option!], { STAGEDROOT_SYSROOT: sysroots.environment })).toBe('option');
    expect(await statusLabel([], { STAGEDROOT_SYSROOT: sysroots.environment })).toBe('environment');
    expect(await statusLabel([], {})).toBe('record');
    writeRecord('id=0001\n'); // a record from an initramfs that did not say where
    expect(await statusLabel([], {})).toBe('file');
    writeRecord(null);
    expect(await statusLabel([], { STAGEDROOT_SYSROOT: '' })).toBe('file');
    expect(findSysroot({ env: {}, places: places() }).from).toBe('environment-file');
  });

  it('reads the environment file as systemd does (quotes, comments, export)', () => {
    expect(parseKeyValues('# c\n; c\nexport A="x y"\nB=\'z\'\n  C = no\nD=1=2\n')).toEqual(new Map([['A', 'x y'], ['B', 'z'], ['D', '1=2']]));
  });

  it('names all four places when none gives a sysroot (usage error, exit 2)', async () => {
    writeRecord(null);
    writeEnvFile('OTHER=1\n');
    const r = await cli(['status'], {}, places());
    expect(r.code).toBe(2);
    expect(r.err).toContain('--sysroot');
    expect(r.err).toContain('STAGEDROOT_SYSROOT');
    expect(r.err).toContain(path.join(runDir, 'booted'));
    expect(r.err).toContain(path.join(etcDir, 'environment'));
  });

  it('every verb that takes --sysroot finds it the same way (boot follows the record of the booted system)', async () => {
    writeRecord(`id=0001\nsysroot=${sysroots.record}\n`);
    writeEnvFile(null);
    for (const args of [['verify'], ['prune'], ['discard'], ['boot']]) {
      const r = await cli(args, {}, places());
      // discard with nothing staged fails with NOTHING_STAGED-like errors, not USAGE: the sysroot was found.
      expect(r.err, args.join(' ')).not.toContain('No sysroot given');
    }
    const r = await cli(['status', '--json'], {}, places());
    expect(JSON.parse(r.out).sysroot).toBe(sysroots.record);
  });
});
