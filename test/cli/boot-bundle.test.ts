import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOT_PATH_VERBS, onBootPath } from '../../src/cli/boot-path.js';
import { globalFlags } from '../../src/cli/flags.js';
import { VERBS } from '../../src/cli/verbs.js';

/**
 * The boot path's verbs (src/cli/verbs.ts's bootPath rows) run from a bundle of their own
 * (dist/cli/boot.cjs); every other command line from the full one (dist/cli/run.cjs).
 * Each bundle is run here as the bin runs it, on twin sysroots, and must answer the same.
 */
const repo = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(repo, 'dist/cli/main.cjs');
let dir: string;
let update: string;
const twin = (name: 'boot' | 'run') => path.join(dir, `sysroot-${name}`);
const runDir = () => path.join(dir, 'run'); // no boot record: `boot` follows current

/** Runs `bundle`'s main (dist/cli/NAME.cjs) in a fresh process, with the places of the test's own. */
function runBundle(name: 'boot' | 'run', argv: string[]): { code: number | null; out: string; err: string } {
  const driver = `const { main } = require(${JSON.stringify(path.join(repo, `dist/cli/${name}.cjs`))}); const io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t), errIsTty: false, env: process.env, places: { runDir: ${JSON.stringify(runDir())}, etcDir: ${JSON.stringify(path.join(dir, 'etc'))} } }; void main(${JSON.stringify(argv)}, io);`;
  const r = spawnSync(process.execPath, ['-e', driver], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_DEBUG: '' } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** What a bundle answers, with the sysroot's path and times made the same for both twins. */
function answer(name: 'boot' | 'run', argv: string[]) {
  const r = runBundle(name, [...argv.map((a) => (a === 'SYSROOT' ? twin(name) : a))]);
  const same = (t: string) => t.replaceAll(twin(name), 'SYSROOT').replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'TIME').replace(/\d+\.\ds\)/g, 'Ns)');
  return { code: r.code, out: same(r.out), err: same(r.err) };
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-bundle-'));
  const tree = path.join(dir, 'tree');
  fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=test\n');
  update = path.join(dir, 'update');
  fs.cpSync(tree, update, { recursive: true });
  fs.writeFileSync(path.join(update, 'etc/motd'), 'updated\n');
  for (const name of ['boot', 'run'] as const) {
    const r = spawnSync(process.execPath, [BIN, 'init', '--sysroot', twin(name), '--from', tree], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
  }
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the boot bundle', () => {
  it('holds exactly the verbs the bin sends to it, and the full bundle every verb', () => {
    // The commands' modules each bundle's source map names, against the table.
    const commandsOf = (name: 'boot' | 'run') =>
      (JSON.parse(fs.readFileSync(path.join(repo, `dist/cli/${name}.cjs.map`), 'utf8')) as { sources: string[] }).sources
        .map((s) => /(?:^|\/)src\/cli\/commands\/([^/]+)\.ts$/.exec(s)?.[1])
        .filter((m) => m !== undefined)
        .sort();
    const modules = (rows: typeof VERBS) => rows.map((v) => v.module).sort();
    expect(commandsOf('boot')).toEqual(modules(VERBS.filter((v) => v.bootPath)));
    expect(commandsOf('run')).toEqual(modules(VERBS));
    expect(commandsOf('run')).toEqual(fs.readdirSync(path.join(repo, 'src/cli/commands')).map((f) => f.replace(/\.ts$/, '')).sort());
    expect(commandsOf('boot')).toEqual(['boot', 'health', 'mark', 'status']);
    expect([...BOOT_PATH_VERBS].sort()).toEqual(['boot', 'health', 'mark-bad', 'mark-good', 'status']);
    expect(onBootPath(['boot'])).toBe(true);
    expect(onBootPath(['--debug', 'mark-good', '--json'])).toBe(true);
    for (const argv of [['--help'], ['stage', 'x'], ['help', 'boot'], [], ['--sysroot', '/x', 'boot']]) expect(onBootPath(argv)).toBe(false);
  });

  it('answers as the full CLI for each of its verbs, in a boot\'s order', () => {
    const steps = [
      ['status', '--sysroot', 'SYSROOT'],
      ['boot', '--sysroot', 'SYSROOT'],
      ['status', '--sysroot', 'SYSROOT', '--json'],
      ['health', '--sysroot', 'SYSROOT', '--check', 'true', '--wanted-check', 'false'],
      ['mark-good', '--sysroot', 'SYSROOT', '--json'],
      ['boot', '--sysroot', 'SYSROOT', '--json'],
      ['mark-bad', '--sysroot', 'SYSROOT', '--reason', 'test'],
      // An update staged and finalized (by the full CLI): the next boot uses a try, health passes it.
      ['stage', '--sysroot', 'SYSROOT', 'UPDATE'],
      ['finalize', '--sysroot', 'SYSROOT'],
      ['boot', '--sysroot', 'SYSROOT'],
      ['status', '--sysroot', 'SYSROOT'],
      ['health', '--sysroot', 'SYSROOT', '--json'],
      ['mark-bad', '--sysroot', 'SYSROOT', '--reason', 'test'],
      ['status', '--sysroot', 'SYSROOT', '--json'],
      ['status', '--sysroot', 'SYSROOT', '--format', 'bootc'],
      ['status', '--help'],
      ['boot', '--no-such-option'],
      ['mark-good', '--sysroot', path.join(dir, 'nothing-here')],
    ];
    const said: string[] = [];
    for (const argv of steps) {
      if (!onBootPath(argv)) {
        for (const name of ['boot', 'run'] as const) {
          const r = spawnSync(process.execPath, [BIN, ...argv.map((a) => (a === 'SYSROOT' ? twin(name) : a === 'UPDATE' ? update : a))], { encoding: 'utf8' });
          expect(r.status, r.stderr).toBe(0);
        }
        continue;
      }
      const a = answer('boot', argv);
      said.push(a.out);
      expect(a, argv.join(' ')).toEqual(answer('run', argv));
      expect(a.out + a.err, argv.join(' ')).not.toContain('boot bundle');
    }
    expect(said).toContain('booted deployment 0002 (2 boot tries left before automatic rollback)\n');
  });

  it('refuses a verb it does not hold as an unknown command (the bin never sends one)', () => {
    const r = runBundle('boot', ['stage', '--sysroot', twin('boot'), 'x']);
    expect(r.code).toBe(2);
    expect(r.err).toContain("unknown command 'stage'");
  });

  it('is what the bin runs for the boot path, and the full bundle for everything else', () => {
    const preload = path.join(dir, 'record-bundle.cjs');
    fs.writeFileSync(preload, "const fs = require('fs'); const read = fs.readFileSync; fs.readFileSync = function (f, ...a) { if (/(boot|run)\\.cjs$/.test(String(f))) process.stderr.write(`read ${require('path').basename(String(f))}\\n`); return read.call(this, f, ...a); };\n");
    const bundleOf = (argv: string[]) => {
      const r = spawnSync(process.execPath, ['-r', preload, BIN, ...argv], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_DEBUG: '' } });
      return [...r.stderr.matchAll(/^read (\S+)$/gm)].map((m) => m[1]);
    };
    for (const verb of BOOT_PATH_VERBS) expect(bundleOf([verb, '--help']), verb).toEqual(['boot.cjs']);
    expect(bundleOf(['status', '--sysroot', twin('boot')])).toEqual(['boot.cjs']);
    expect(bundleOf(['trust', 'list', '--sysroot', twin('run')])).toEqual(['run.cjs']);
    expect(bundleOf(['--help'])).toEqual(['run.cjs']);
    expect(bundleOf(['--version'])).toEqual([]);
    expect(bundleOf(['--debug', 'boot', '--help'])).toEqual(['boot.cjs']);
  });

  it('reads --debug and --version in one place, for the bin and the program alike', () => {
    expect(globalFlags(['--debug', 'status', '--json'])).toEqual({ argv: ['status', '--json'], debug: true, version: false });
    expect(globalFlags(['stage', '--', '--debug'])).toEqual({ argv: ['stage', '--', '--debug'], debug: false, version: false });
    expect(globalFlags(['--debug', '--version'])).toMatchObject({ argv: ['--version'], debug: true, version: true });
    expect(globalFlags(['-V']).version).toBe(true);
    expect(globalFlags(['status', '--version']).version).toBe(false);
    expect(globalFlags(['status'], { STAGEDROOT_DEBUG: '1' }).debug).toBe(true);
    expect(globalFlags(['status'], { STAGEDROOT_DEBUG: '0' }).debug).toBe(false);
    const version = (JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8')) as { version: string }).version;
    for (const argv of [['--version'], ['-V'], ['--debug', '--version']]) {
      const r = spawnSync(process.execPath, [BIN, ...argv], { encoding: 'utf8' });
      expect({ code: r.status, out: r.stdout }, argv.join(' ')).toEqual({ code: 0, out: `${version}\n` });
    }
  });
});
