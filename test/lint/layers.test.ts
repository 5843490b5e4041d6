/**
 * The layer rule of eslint.config.js (layers/downward-only): an import from a higher layer
 * is an error, wherever it hides (import, export from, import(), import('...') types).
 */
import * as path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });

async function layerErrors(file: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return r!.messages.filter((m) => m.ruleId === 'layers/downward-only').map((m) => m.message);
}

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

  it('allows the same layer and lower ones', async () => {
    expect(await layerErrors('src/stage/probe.ts', "import { applyTransition } from '../store/apply-transition.js';\nimport { finalize } from '../commit/finalize.js';\nexport { applyTransition, finalize };")).toEqual([]);
    expect(await layerErrors('src/sysroot-probe.ts', "import { Sysroot } from './sysroot.js';\nexport { Sysroot };")).toEqual([]);
  });
});
