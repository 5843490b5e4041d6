import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `import 'stagedroot'` and `'stagedroot/testing'` (package.json's exports) load the
 * library bundle that scripts/build-cli.mjs makes (dist/lib/: one CommonJS bundle for both
 * entries, run from its V8 code cache by dist/lib/load.cjs, with ES module entries
 * re-exporting its names). Checked through a node_modules/stagedroot link, as an importer
 * resolves it: the same names as tsc's dist/, one set of classes for both entries, tree
 * tasks on the bundle's own worker.
 */
const repo = fileURLToPath(new URL('../..', import.meta.url));
let dir: string;

function node(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8', env: { ...process.env, STAGEDROOT_DEBUG: '' } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-library-bundle-'));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(repo, path.join(dir, 'node_modules/stagedroot'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the library bundle importers load', () => {
  it("exports what tsc's dist/index.js and dist/testing/index.js export", () => {
    const names = (spec: string) => {
      const r = node(['--input-type=module', '-e', `console.log(JSON.stringify(Object.keys(await import(${JSON.stringify(spec)})).sort()))`]);
      expect(r.code, r.err).toBe(0);
      return JSON.parse(r.out) as string[];
    };
    const main = names('stagedroot');
    expect(main).toContain('Sysroot');
    expect(main).toEqual(names(path.join(repo, 'dist/index.js')));
    expect(names('stagedroot/testing')).toEqual(names(path.join(repo, 'dist/testing/index.js')));
  });

  it('runs a sysroot through a stage and a reboot, with one Sysroot class for both entries and tree tasks on dist/lib/tree-worker.js', () => {
    fs.writeFileSync(
      path.join(dir, 'use.mjs'),
      `import { Sysroot, isStagedrootError } from 'stagedroot';
import { tempSysroot, reboot } from 'stagedroot/testing';
const t = await tempSysroot({ tree: { 'etc/os-release': 'ID=x\\n' } });
console.log(t.sysroot instanceof Sysroot);
await t.sysroot.stage({ version: 1, label: 'two', files: [{ path: '/etc/motd', contents: 'hi\\n' }] });
await reboot(t.sysroot);
console.log(t.sysroot.status().deployments.map((d) => d.id + ' ' + d.label).join(', '));
try { await Sysroot.open(t.scratch); } catch (e) { console.log(isStagedrootError(e), e.code); }
t.cleanup();
`,
    );
    fs.writeFileSync(path.join(dir, 'workers.cjs'), "const wt = require('node:worker_threads'); const W = wt.Worker;\nwt.Worker = class extends W { constructor(u, o) { process.stderr.write(`worker ${u}\\n`); super(u, o); } };\n");
    const r = node(['-r', './workers.cjs', 'use.mjs']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe('true\n0002 two, 0001 initial\ntrue NOT_A_SYSROOT\n');
    const workers = r.err.split('\n').filter((l) => l.startsWith('worker '));
    expect(workers.length).toBeGreaterThan(0);
    expect(new Set(workers)).toEqual(new Set([`worker file://${path.join(repo, 'dist/lib/tree-worker.js')}`]));
  });
});
