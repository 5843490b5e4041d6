/**
 * The skip check (test/helpers/skip-check.ts, run by the globalSetup at the run's end): in CI
 * (`CI=true`) a skipped test fails the run unless test/helpers/allowed-skips.ts lists it with
 * its reason. Run for real: vitest over fixtures/skip-check/guarded.test.ts, whose guards
 * skip one listed test, one unlisted one and one that skips itself at run time.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { ALLOWED_SKIPS } from './allowed-skips.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const VITEST = path.join(ROOT, 'node_modules/.bin/vitest');
const CONFIG = path.join(ROOT, 'fixtures/skip-check/vitest.config.ts');

/** vitest over the fixture, in an environment of its own (none of this run's VITEST_* or CI). */
async function fixtureRun(env: Record<string, string>, args: string[] = []) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'CI' && k !== 'FIXTURE_GUARDS'));
  const r = await execa(VITEST, ['run', '--config', CONFIG, ...args], { cwd: ROOT, env: { ...base, ...env, NO_COLOR: '1' }, extendEnv: false, reject: false, all: true });
  return { exitCode: r.exitCode, out: r.all ?? '' };
}

describe('the skip check', () => {
  it('in CI, a skipped test that is not on the list fails the run, each named (a guard, a ctx.skip with its note); a listed one does not', async () => {
    // Also with the reporters chosen on the command line, as .ci/run does (they replace the config's).
    const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-skip-check-')), 'report.json');
    for (const args of [[], ['--reporter=default', '--reporter=json', `--outputFile=${json}`]]) {
      const r = await fixtureRun({ CI: 'true' }, args);
      expect(r.out).toMatch(/1 passed \| 3 skipped/);
      expect(r.out).toContain('skip check: 2 tests were skipped in CI (CI=true)');
      expect(r.out).toContain('  guarded.test.ts > guards > a guard that skips, not on the list\n');
      expect(r.out).toContain('  guarded.test.ts > guards > skips itself at run time (no such tool here)\n');
      expect(r.out).not.toContain('> a guard that skips, on the list');
      expect(r.exitCode).toBe(1);
    }
    expect(JSON.parse(fs.readFileSync(json, 'utf8'))).toMatchObject({ numPassedTests: 1, numPendingTests: 3 });
    fs.rmSync(path.dirname(json), { recursive: true });
  });

  it('in CI, only listed skips: the run passes', async () => {
    const r = await fixtureRun({ CI: 'true', FIXTURE_GUARDS: 'off' });
    expect(r.out).toMatch(/3 passed \| 1 skipped/);
    expect(r.out).not.toContain('skip check');
    expect(r.exitCode).toBe(0);
  });

  it('outside CI, or a run filtered by test name, skips pass', async () => {
    for (const r of [await fixtureRun({}), await fixtureRun({ CI: 'true' }, ['-t', 'runs'])]) {
      expect(r.out).not.toContain('skip check');
      expect(r.exitCode).toBe(0);
    }
  });
});

describe('test/helpers/allowed-skips.ts', () => {
  it('names, for each entry, a test file and a test in it, and the reason', () => {
    for (const a of ALLOWED_SKIPS) {
      expect(a.reason.trim(), `${a.file} > ${a.test}`).not.toBe('');
      const name = a.test.split(' > ').at(-1)!;
      expect(fs.readFileSync(path.join(ROOT, a.file), 'utf8'), a.file).toContain(name);
    }
  });
});
