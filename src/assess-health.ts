import { StagedrootError } from './errors.js';
import { runHealthChecks, type CheckResult, type HealthOptions, type HealthReport } from './boot/health.js';
import type { Sysroot } from './sysroot.js';
import type { Status } from './state/status.js';
import { boundText } from './util/bounded-output.js';

export interface AssessResult {
  report: HealthReport;
  /**
   * marked-good: every required check passed. marked-bad: a required check failed on a
   * deployment under assessment; current now points back at the last good deployment
   * (it runs at the next boot). failed-on-good: a required check failed on a deployment
   * already marked good; as greenboot does, nothing is rolled back (the update is not
   * the suspect), the failure is reported.
   */
  action: 'marked-good' | 'marked-bad' | 'failed-on-good';
  status: Status;
}

/** The output of the failed checks, for the failure record (bounded). */
function failureOutput(failed: readonly CheckResult[]): string {
  return boundText(failed.map((r) => `--- ${r.kind} check ${r.name} (${r.outcome}) ---\n${r.output}`).join('\n'));
}

/**
 * Boot assessment: runs the checks against the booted deployment (without holding the
 * writer lock: checks may take minutes), then marks it good, or marks it bad with phase
 * `health` (the checks' output kept in lastFailure.output) so the next boot runs the
 * last good deployment.
 */
export async function assessHealth(sysroot: Sysroot, o: HealthOptions = {}): Promise<AssessResult> {
  const before = sysroot.status();
  if (before.booted === null) throw new StagedrootError('INVALID_TRANSITION', 'Nothing has been booted yet: run `stagedroot boot` first');
  const booted = before.deployments.find((d) => d.id === before.booted)!;
  if (booted.failed) {
    // Marked bad on this boot already: a later pass must not bless it again.
    throw new StagedrootError('INVALID_TRANSITION', `Deployment ${booted.id} was marked bad on this boot (${booted.failure?.reason ?? 'no reason'}); deployment ${before.current} runs at the next boot`, { value: booted.id });
  }
  const report = await runHealthChecks({
    ...o,
    env: { STAGEDROOT_SYSROOT: sysroot.path, STAGEDROOT_DEPLOYMENT: booted.id, STAGEDROOT_LABEL: booted.label, STAGEDROOT_TREE: booted.path, ...o.env },
  });
  if (report.ok) return { report, action: 'marked-good', status: await sysroot.markGood({ healthChecks: report.results.length }) };
  if (booted.good) return { report, action: 'failed-on-good', status: sysroot.status() };
  const names = report.failedRequired.map((r) => `${r.name} (${r.outcome})`).join(', ');
  const reason = `required health check${report.failedRequired.length === 1 ? '' : 's'} failed: ${names}`;
  return { report, action: 'marked-bad', status: await sysroot.markBad(reason, { phase: 'health', output: failureOutput(report.failedRequired) }) };
}
