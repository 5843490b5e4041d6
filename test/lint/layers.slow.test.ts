/**
 * The layer rule of eslint.config.js (layers/downward-only), run through ESLint with the
 * project's own config, as `npm run lint` runs it: an import from a higher layer is an
 * error wherever it hides (import, export from, import(), import('...') types), so is a
 * circle of imports (inside one layer too) and a file in no layer. Every case that must
 * pass has a twin that must fail at the same path, so that a path the rule ignores cannot
 * pass by accident.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });

async function layerErrors(file: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  const fatal = r!.messages.filter((m) => m.fatal);
  expect(fatal, `${file} parses`).toEqual([]);
  return r!.messages.filter((m) => m.ruleId === 'layers/downward-only').map((m) => m.message);
}

const read = (rel: string): string => fs.readFileSync(path.join(ROOT, rel), 'utf8');

describe('layers/downward-only', () => {
  it('refuses an import from a higher layer in every form', async () => {
    const code = [
      "import type { Context } from '../context.js';",
      "export { stage } from '../stage/stage.js';",
      "export type S = import('../sysroot.js').Sysroot;",
      "export const later = () => import('../store/recover.js');",
    ].join('\n');
    const errors = await layerErrors('src/state/probe.ts', code);
    expect(errors.map((e) => e.replace(/layer \d+/g, 'layer N'))).toEqual(
      ['context.ts', 'stage', 'sysroot.ts', 'store'].map((to) => `state (layer N) must not import ${to} (layer N): layers import only downwards (LAYERS in eslint.config.js)`),
    );
  });

  it('resolves relative paths from nested folders', async () => {
    expect(await layerErrors('src/sources/ignition/probe.ts', "import { Sysroot } from '../../sysroot.js';\nexport { Sysroot };")).toHaveLength(1);
    expect(await layerErrors('src/sources/ignition/probe.ts', "import { normalizeTreePath } from '../../fs/core/paths.js';\nexport { normalizeTreePath };")).toEqual([]);
  });

  it('allows the same layer and lower ones (and refuses an upward import from the same files)', async () => {
    const stage = "import { applyTransition } from '../store/apply-transition.js';\nimport { finalize } from '../commit/finalize.js';\nexport { applyTransition, finalize };\n";
    expect(await layerErrors('src/stage/probe.ts', stage)).toEqual([]);
    expect(await layerErrors('src/stage/probe.ts', stage + "export { Sysroot } from '../sysroot.js';")).toHaveLength(1);
    const cli = "import { Sysroot } from '../sysroot.js';\nimport { assessHealth } from '../assess-health.js';\nexport { Sysroot, assessHealth };\n";
    expect(await layerErrors('src/cli/probe.ts', cli)).toEqual([]);
    // (an import of the CLI from sysroot.ts also closes a circle: the CLI imports the Sysroot)
    expect(await layerErrors('src/sysroot.ts', "export { buildProgram } from './cli/program.js';")).toContainEqual(expect.stringMatching(/^sysroot\.ts \(layer \d+\) must not import cli \(layer \d+\)/));
  });

  it('orders the folders of src/fs: core, jobs, manifests, trees', async () => {
    expect(await layerErrors('src/fs/trees/probe.ts', "export { ManifestWriter } from '../manifests/manifest.js';\nexport { runTreeTask } from '../jobs/tree-jobs.js';\nexport { fsyncDir } from '../core/fsync-dir.js';")).toEqual([]);
    expect(await layerErrors('src/fs/core/probe.ts', "export { RootFs } from '../trees/root-fs.js';")).toEqual([
      'fs/core (layer 2) must not import fs/trees (layer 5): layers import only downwards (LAYERS in eslint.config.js)',
    ]);
    expect(await layerErrors('src/fs/manifests/probe.ts', "export type { TaskHooks } from '../jobs/tree-tasks.js';\nexport { walkTree } from '../core/walk.js';")).toEqual([]);
    expect(await layerErrors('src/fs/jobs/probe.ts', "export { manifestTasks } from '../manifests/tasks.js';")).toHaveLength(1);
  });

  it('refuses a file in no layer', async () => {
    expect(await layerErrors('src/probe-in-no-layer.ts', 'export const x = 1;\n')).toEqual(['src/probe-in-no-layer.ts is in no layer: give it its place in LAYERS (eslint.config.js)']);
    expect(await layerErrors('src/fs/probe.ts', 'export const x = 1;\n')).toEqual(['src/fs/probe.ts is in no layer: give it its place in LAYERS (eslint.config.js)']);
  });

  it('refuses a circle of imports inside one layer, naming it (the real files, as they are)', async () => {
    // fs/core/paths.ts imports names.ts; names.ts importing paths.ts closes a circle.
    expect(read('src/fs/core/paths.ts')).toContain("from './names.js'");
    const names = read('src/fs/core/names.ts');
    expect(await layerErrors('src/fs/core/names.ts', names)).toEqual([]);
    expect(await layerErrors('src/fs/core/names.ts', `import { comparePaths } from './paths.js';\nexport const probe = comparePaths;\n${names}`)).toEqual([
      'import circle: fs/core/names.ts → fs/core/paths.ts → fs/core/names.ts (break it: move what both need one layer down, or into the importing module)',
    ]);
    // The circle this rule was written for (copy-entry ↔ root-fs), even through a type-only import.
    const rootFs = read('src/fs/trees/root-fs.ts');
    expect(await layerErrors('src/fs/trees/root-fs.ts', rootFs)).toEqual([]);
    const copyEntry = read('src/fs/trees/copy-entry.ts');
    const circle = await layerErrors('src/fs/trees/copy-entry.ts', `import type { RootFs } from './root-fs.js';\nexport type Probe = RootFs;\n${copyEntry}`);
    // root-fs reaches copy-entry through the tree-io seam now; the circle named is the real one.
    expect(circle).toHaveLength(1);
    expect(circle[0]).toMatch(/^import circle: fs\/trees\/copy-entry\.ts → fs\/trees\/root-fs\.ts → (\S+ → )*fs\/trees\/copy-entry\.ts \(break it: move what both need one layer down, or into the importing module\)$/);
  });

  it('finds nothing to refuse in src/ as it is (what `npm run lint` checks)', async () => {
    const results = await eslint.lintFiles(['src']);
    const layerMessages = results.flatMap((r) => r.messages.filter((m) => m.ruleId === 'layers/downward-only').map((m) => `${path.relative(ROOT, r.filePath)}: ${m.message}`));
    expect(layerMessages).toEqual([]);
    expect(results.length).toBeGreaterThan(150);
  }, 180_000);
});

