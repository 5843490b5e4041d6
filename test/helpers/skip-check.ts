import * as path from 'node:path';
import type { TestModule, TestProject } from 'vitest/node';

/** A test that may be skipped in CI, and why. */
export interface AllowedSkip {
  /** The test file, from the project's root (the repository's root). */
  file: string;
  /** The test's full name: its describe blocks and its name joined with " > ". */
  test: string;
  reason: string;
}

export interface SkippedTest {
  file: string;
  test: string;
  note: string | undefined;
}

/** Every skipped test of a run (skipped at collection, `skipIf`, or by `ctx.skip()`). */
export function skippedTests(modules: readonly TestModule[], root: string): SkippedTest[] {
  const out: SkippedTest[] = [];
  for (const m of modules) {
    for (const t of m.children.allTests('skipped')) {
      const r = t.result();
      out.push({ file: path.relative(root, m.moduleId), test: t.fullName, note: r.state === 'skipped' ? r.note : undefined });
    }
  }
  return out;
}

/** The skipped tests that are not on the list. */
export function disallowedSkips(skipped: readonly SkippedTest[], allowed: readonly AllowedSkip[]): SkippedTest[] {
  return skipped.filter((s) => !allowed.some((a) => a.file === s.file && a.test === s.test));
}

/**
 * A globalSetup that, in CI (`CI=true`), fails the run when a test was skipped that is
 * not on `allowed`, naming each. It runs at the run's end (the globalSetup's teardown),
 * whatever reporters the command line chose; a run filtered by test name (`-t`) skips
 * the tests it leaves out, so is not checked.
 */
export function skipCheck(allowed: readonly AllowedSkip[]): (project: TestProject) => () => void {
  return (project) => () => {
    if (process.env.CI !== 'true' || project.config.testNamePattern) return;
    const bad = disallowedSkips(skippedTests(project.vitest.state.getTestModules(), project.config.root), allowed);
    if (bad.length === 0) return;
    const lines = bad.map((s) => `  ${s.file} > ${s.test}${s.note ? ` (${s.note})` : ''}`);
    console.error(
      [
        `skip check: ${bad.length} test${bad.length === 1 ? ' was' : 's were'} skipped in CI (CI=true), and only the tests of test/helpers/allowed-skips.ts may be:`,
        ...lines,
        'Make each run here (install its tool, see the SKIPPED line above it), or add it to the list with its reason.',
      ].join('\n'),
    );
    process.exitCode = 1;
  };
}
