/**
 * `npm run test:src` (vitest.src.config.ts) leaves out exactly the tests that run the
 * compiled library, read from what each file names.
 */
import { describe, expect, it } from 'vitest';
import { BUILT_TESTS, needsDist } from '../../vitest.src.config.js';

describe('the no-build tier', () => {
  it('sorts a test by what it runs: the built CLI, dist/ paths, the crash helpers; not the in-process CLI', () => {
    expect(needsDist(`import { cli, cliProcess } from '../helpers/cli.js';`)).toBe(true);
    expect(needsDist(`import { CLI } from '../helpers/cli.js';`)).toBe(true);
    expect(needsDist(`import { requireDist } from '../helpers/dist.js';`)).toBe(true);
    expect(needsDist(`import { crashRun } from '../helpers/crash.js';`)).toBe(true);
    expect(needsDist(`const bin = path.join(root, 'dist/cli/main.cjs');`)).toBe(true);
    expect(needsDist(`import { cli, NO_PLACES } from '../helpers/cli.js';\n// the CLI in this process`)).toBe(false);
    expect(needsDist(`import { tempSysroot } from '../../src/testing/index.js';`)).toBe(false);
  });

  it('leaves out the tests that spawn the built CLI or its crash program, and keeps the rest', () => {
    expect(BUILT_TESTS).toContain('test/cli/boot-bundle.test.ts');
    expect(BUILT_TESTS).toContain('test/crash-points.slow.test.ts');
    expect(BUILT_TESTS).not.toContain('test/operations/table.test.ts');
    expect(BUILT_TESTS).not.toContain('test/stage/dry-run.test.ts');
  });
});
