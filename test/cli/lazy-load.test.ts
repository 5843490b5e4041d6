import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempSysroot } from '../../src/testing/index.js';
import { cliProcess } from '../helpers/cli.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const RECORD = fileURLToPath(new URL('../helpers/record-loads.mjs', import.meta.url));
const FAKE = fileURLToPath(new URL('../helpers/fake-systemctl.sh', import.meta.url));

/**
 * The verbs on the boot path (boot at every boot, mark-good after it, status by agents)
 * load only what they run: not the sources, staging, finalize, the hooks' runner, nor
 * tar, yaml or execa. Checked on tsc's dist/ (one module a file, so the loader sees
 * which): the CLI bundles (dist/cli/run.cjs, and boot.cjs for these verbs) have the same
 * lazy imports, evaluated the same way.
 */
function loadsOf(args: string[]): string[] {
  const log = path.join(dir, `loads-${args[0]}.txt`);
  fs.rmSync(log, { force: true });
  const driver = `import { runCli } from ${JSON.stringify(new URL('dist/cli/program.js', `file://${repo}/`).href)}; import { processIo } from ${JSON.stringify(new URL('dist/cli/io.js', `file://${repo}/`).href)}; process.exitCode = await runCli(${JSON.stringify(args)}, processIo);`;
  // A file, not --input-type=module -e: a worker thread inherits the flags, and the flag needs -e.
  const file = path.join(dir, 'driver.mjs');
  fs.writeFileSync(file, driver);
  const r = spawnSync(process.execPath, ['--import', RECORD, file], { encoding: 'utf8', env: { ...process.env, RECORD_LOADS: log } });
  expect(r.status, r.stderr).toBe(0);
  return fs.readFileSync(log, 'utf8').trim().split('\n').map((u) => path.relative(repo, fileURLToPath(u)));
}

let dir: string;
let sysroot: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-lazy-'));
  const tree = path.join(dir, 'tree');
  fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=test\n');
  sysroot = path.join(dir, 'sysroot');
  expect(cliProcess(['init', '--sysroot', sysroot, '--from', tree]).code).toBe(0);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// commit/finish.js and recover-live.js are finalize's and apply-live's resume steps, which
// every writer's recovery runs (the boot hook and mark-good are writers): the tail of a
// finalize, or a live apply, a crash cut short; carry-live.js is what the boot hook does
// after a live apply (the /etc edits made since); rollback-tree.js is the resume step that
// gives a tree booted after a live apply its own files back (restoreRollbackTrees). The rest
// of commit/ (finalize and apply-live themselves) is not loaded, nor apply-live's D-Bus client
// (systemd/bus/: recovery's undo of a cut live apply spawns systemctl).
const HEAVY = [/(^|\/)node_modules\/(execa|tar|yaml)\//, /^dist\/(sources|stage|validate|install|systemd\/bus)\//, /^dist\/commit\/(?!(finish|recover-live|carry-live|rollback-tree)\.js$)/];

describe('the boot path loads only what it runs', () => {
  for (const args of [['status'], ['boot'], ['mark-good'], ['--version']]) {
    it(`stagedroot ${args[0]}`, () => {
      const loaded = loadsOf(args[0] === '--version' ? args : [...args, '--sysroot', sysroot]);
      expect(loaded.length).toBeGreaterThan(3); // the recording works
      expect(loaded).toContain('dist/cli/program.js');
      expect(loaded.filter((f) => HEAVY.some((h) => h.test(f)))).toEqual([]);
      // Only the verb's own module of src/cli/commands/.
      expect(loaded.filter((f) => f.startsWith('dist/cli/commands/'))).toEqual(args[0] === '--version' ? [] : [`dist/cli/commands/${args[0] === 'mark-good' ? 'mark' : args[0]}.js`]);
    });
  }

  it('the CLI bundle is what the bin runs, and the worker bundle defines every tree task', () => {
    expect(cliProcess(['--version']).out.trim()).toBe(JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8')).version);
    // A module that defines tree tasks must be in the worker's entry, or a CLI worker would not find its tasks.
    const entry = fs.readFileSync(path.join(repo, 'src/cli/tree-worker-main.ts'), 'utf8');
    const definers = fs.readdirSync(path.join(repo, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && /\bdefineTreeTask\(/.test(fs.readFileSync(path.join(repo, 'src', f), 'utf8')));
    expect(definers.length).toBeGreaterThan(0);
    for (const f of definers) expect(entry, `src/cli/tree-worker-main.ts imports ${f}`).toContain(`'../${f.replace(/\.ts$/, '.js')}'`);
  });
});

describe('apply-live loads only what it runs', () => {
  it('its systemctl actions are spawned without execa (whose import was ~250 ms of the first action); the decision stage recorded is used without the policy document\'s parser (yaml, the MachineConfig schemas)', async () => {
    const t = await tempSysroot({ tree: { 'etc/containers/policy.json': '{}\n', 'usr/lib/os-release': 'ID=test\n' } });
    try {
      await t.sysroot.boot({ runDir: '/nonexistent' });
      await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: '{"default":[{"type":"reject"}]}\n' }] });
      const log = path.join(t.scratch, 'systemctl.log');
      const loaded = loadsOf(['apply-live', '--sysroot', t.dir, '--systemctl', `sh ${FAKE} ${log}`]);
      expect(fs.readFileSync(log, 'utf8').trim().split('\n')).toEqual(['reload crio.service']);
      expect(loaded).toContain('dist/commit/apply-live.js');
      expect(loaded.filter((f) => /(^|\/)node_modules\/execa\//.test(f))).toEqual([]);
      expect(loaded.filter((f) => /(^|\/)node_modules\/yaml\/|^dist\/(activation\/policy-document|stage\/activation-of|sources\/)/.test(f))).toEqual([]);
    } finally {
      t.cleanup();
    }
  });
});

describe('stage loads the tar reader only for what reads tar', () => {
  it('a stage of an Ignition config does not load node-tar (the first tar read does)', () => {
    const ign = path.join(dir, 'update.ign');
    fs.writeFileSync(ign, JSON.stringify({ ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/motd', overwrite: true, contents: { source: 'data:,hello' } }] } }));
    const loaded = loadsOf(['stage', '--sysroot', sysroot, ign]);
    expect(loaded).toContain('dist/sources/tar/reader.js');
    expect(loaded.filter((f) => /(^|\/)node_modules\/tar\//.test(f))).toEqual([]);
    expect(cliProcess(['discard', '--sysroot', sysroot]).code).toBe(0);
  });
});
