import { StagedrootError, type Issue } from '../errors.js';
import type { ValidationContext, Validator, ValidationResult } from './types.js';

function nameOf(v: Validator, i: number): string {
  return typeof v === 'function' ? v.name || `validator #${i + 1}` : v.name;
}

/** Runs every validator (all of them, to report every problem at once) and collects issues. */
export async function runValidators(validators: readonly Validator[], ctx: ValidationContext): Promise<ValidationResult> {
  const issues: Issue[] = [];
  for (const [i, v] of validators.entries()) {
    const run = typeof v === 'function' ? v : v.run;
    try {
      const found = await run(ctx);
      if (!Array.isArray(found)) {
        issues.push({ code: 'VALIDATOR_BROKEN', path: '', message: `${nameOf(v, i)} returned ${typeof found}, not an array of issues`, severity: 'error' });
        continue;
      }
      issues.push(...found);
    } catch (err) {
      const msg = err instanceof StagedrootError ? `${err.code}: ${err.message}` : (err as Error)?.message ?? String(err);
      issues.push({ code: 'VALIDATOR_CRASHED', path: '', message: `${nameOf(v, i)} threw: ${msg}`, severity: 'error' });
    }
  }
  return { issues };
}
