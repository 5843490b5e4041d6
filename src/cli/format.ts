import { formatActivation } from './format-activation.js';
import type { DryRunResult } from '../stage/dry-run.js';
import type { PathChange } from '../fs/manifests/diff-manifests.js';
import type { Drift } from '../fs/manifests/verify-tree.js';
import { displayPath } from '../fs/core/names.js';
import type { MergeStatus, Status } from '../state/status.js';

/** Human-readable views of results (pure functions; the CLI prints them). */
export function formatStatus(s: Status): string {
  const lines: string[] = [`sysroot ${s.sysroot} (storage: ${s.storage === 'btrfs' ? 'btrfs subvolumes' : 'portable'})`];
  const flags = (d: Status['deployments'][number]): string =>
    [d.booted && 'booted', d.current && 'current', d.staged && 'staged', d.rollback && 'rollback', d.pinned && 'pinned', d.locked && 'locked', d.failed && 'FAILED', d.good && 'good', d.triesLeft !== null && `tries-left=${d.triesLeft}`]
      .filter(Boolean)
      .join(' ');
  for (const d of s.deployments) {
    const mark = d.current ? '*' : d.staged ? '+' : ' ';
    lines.push(`${mark} ${d.id}  ${d.label.padEnd(20)} ${flags(d)}`);
    if (d.failure) lines.push(`        failed in ${d.failure.phase}: ${d.failure.reason.split('\n')[0]}`);
    if (d.liveApplied) lines.push(`        applied live at ${d.liveApplied.at} in ${d.liveApplied.from}'s root (${d.liveApplied.paths} path${d.liveApplied.paths === 1 ? '' : 's'}; ${d.liveApplied.actions.map((a) => a.type).join(', ') || 'no action'}), no reboot`);
    if (d.good && d.healthChecks === 0) lines.push('        marked good with no health checks configured: reaching the health service was all it took, not an assessment');
  }
  if (s.bootedByChoice) lines.push(`booted by choice: ${s.booted} was picked at boot instead of current ${s.current} (nothing is marked bad for it; the next default boot runs ${s.current})`);
  else if (s.activeLive) lines.push(`active live: ${s.activeLive.deployment} runs in the booted ${s.activeLive.runningIn}'s root without a reboot; the next boot runs ${s.activeLive.deployment} with the /etc edits made since`);
  else if (s.pendingReboot) lines.push(`pending reboot: the next boot runs ${s.current} (booted: ${s.booted ?? 'none'})`);
  if (s.finalizationLocked) lines.push(`finalization locked: ${s.staged} stays staged until \`stagedroot unlock\``);
  if (s.lastFailure) {
    const f = s.lastFailure;
    lines.push(`last failure: ${f.id} (${f.label}) in ${f.phase} at ${f.at}:`);
    lines.push(...f.reason.split('\n').map((l) => `  ${l}`));
  }
  if (s.finalizeFailure && !s.finalizeFailure.reported) lines.push(`finalize failed for ${s.finalizeFailure.id}: ${s.finalizeFailure.reason}`);
  const shared = Object.entries(s.shared);
  lines.push(shared.length ? `shared: ${shared.map(([rel, host]) => `/${rel} at ${host}`).join(', ')}` : 'shared: none');
  if (s.lastMerge) lines.push(...formatMerge(s.lastMerge));
  return lines.join('\n') + '\n';
}

/** The last merge: what was carried, and where each local version the update won over was kept. */
export function formatMerge(m: MergeStatus): string[] {
  const n = m.conflicts.length;
  const lines = [`last merge into ${m.id} at ${m.at}: ${m.carried} local change${m.carried === 1 ? '' : 's'} carried${n ? `, ${n} conflict${n === 1 ? '' : 's'} where the update won` : ''}`];
  for (const c of m.conflicts) lines.push(`  ${c.path}: ${c.kept === null ? 'deleted locally; the update keeps it' : `local version kept at ${c.kept}`}`);
  return lines;
}

export function formatDiff(changes: PathChange[]): string {
  const sign = { added: 'A', removed: 'D', modified: 'M' } as const;
  return changes.map((c) => `${sign[c.change]} ${displayPath(c.path)}${c.what ? ` (${c.what.join(', ')})` : ''}`).join('\n') + (changes.length ? '\n' : '');
}

export function formatDrift(id: string, drift: Drift[]): string {
  if (drift.length === 0) return `deployment ${id} matches its manifest\n`;
  const lines = drift.map((d) => `${d.kind.padEnd(8)} ${displayPath(d.path)}${d.expected !== undefined || d.actual !== undefined ? `  expected ${d.expected ?? '-'}, found ${d.actual ?? '-'}` : ''}`);
  return `deployment ${id} has drifted (${drift.length} difference${drift.length === 1 ? '' : 's'}):\n${lines.join('\n')}\n`;
}

/** A dry run for people: the changes as `diff` prints them, then the issues and a verdict. */
export function formatDryRun(r: DryRunResult): string {
  if (r.alreadyRunning) return `the booted deployment ${r.base} already runs this image (${r.origin?.digest}): a stage would do nothing\n`;
  const issues = r.issues.map((i) => `${i.severity} ${i.code} at ${i.path || '(root)'}: ${i.message}\n`).join('');
  const n = r.changes.length;
  const verdict = r.ok
    ? `dry run: staging would change ${n} path${n === 1 ? '' : 's'} of deployment ${r.base} (${r.label}); nothing was written\n`
    : `dry run: the stage would be rejected (${r.issues.length} issue${r.issues.length === 1 ? '' : 's'}); nothing was written\n`;
  return formatDiff(r.changes) + issues + verdict + (r.ok && r.activation ? formatActivation(r.activation) : '');
}
