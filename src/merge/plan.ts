import { comparePaths, isUnder } from '../fs/core/paths.js';
import type { ManifestEntry } from '../fs/manifests/manifest-line.js';
import { sameEntry, type TypeConflict } from '../fs/manifests/same-entry.js';
import type { Row } from './merge-rows.js';

export type { Row, TypeConflict };

/**
 * The /etc 3-way merge, as a pure plan. For every path under a merged directory there
 * are three versions: `b` in the booted deployment's manifest (what it was deployed
 * with), `l` in the running system's live tree (what it is now), `n` in the staged
 * deployment's manifest (built from the live tree at stage, then updated). The target
 * for the new deployment is:
 *
 * - on a path the update decides (one it wrote or removed, or below one it removed or
 *   turned into a non-directory): the update's version `n`; a local change there (l≠b)
 *   that differs from it is kept aside and reported (the update wins);
 * - anywhere else: the running system's version `l` (local edits, additions and
 *   deletions, before or after the stage, are carried; untouched files equal `b`, which
 *   the update did not change either).
 *
 * A local directory where the update has a non-directory (or the reverse) cannot be
 * merged without losing one of them: a type conflict, refused.
 *
 * The rows (see src/merge/merge-rows.ts) come in manifest order; the planner passes over a
 * row whose live and staged entries are the same (but the `.updated` stamp's, see
 * rowsAlwaysPlanned), so it may be given only the others.
 */

/** What the update did, from its delta: entries it wrote (with their type) and paths it removed. */
export interface UpdatePaths {
  changed: ReadonlyMap<string, ManifestEntry['t']>;
  removed: ReadonlySet<string>;
}

export type MergeAction =
  /** Copy the live entry into the new tree (a directory: its attributes; `replace` when the type differs). */
  | { kind: 'carry'; path: string; replace: boolean }
  /** Remove the path (and what is below it) from the new tree. */
  | { kind: 'remove'; path: string };

export interface MergePlan {
  actions: MergeAction[];
  /** Live entries to keep aside before the update's version replaces them. */
  keep: string[];
  /** Paths where the update won over a local change (`kept`: a local version exists). */
  conflicts: { path: string; kept: boolean }[];
  typeConflicts: TypeConflict[];
  /** Local changes carried into the new tree. */
  carried: number;
}

const TYPE = { f: 'file', d: 'directory', l: 'symlink', o: 'special file' } as const;
const kind = (e: ManifestEntry | null): string => (e === null ? 'nothing' : TYPE[e.t]);
const isDir = (e: ManifestEntry | null): boolean => e !== null && e.t === 'd';

/** `.updated` stamps are cleared in a new deployment (systemd's ConditionNeedsUpdate= runs once after an update). */
export function isUpdateStamp(p: string, mergedDir: string): boolean {
  return p === `${mergedDir}/.updated` && mergedDir === 'etc';
}

/** The paths whose rows the planner needs even when their live and staged entries are the same. */
export function rowsAlwaysPlanned(mergedDir: string): string[] {
  return mergedDir === 'etc' ? ['etc/.updated'] : [];
}

/**
 * The only paths of a merged directory where a type conflict can arise (see add): a
 * path the update wrote or removed itself (the live entry a directory and the update's
 * not, or the reverse), or an ancestor of a path it wrote (a live non-directory where
 * the update writes below). Planning the rows of these paths alone, in manifest order,
 * gives the same type conflicts as planning every row: a row skipped below a subtree
 * an earlier action removed has no live entry (the subtree was deleted or is a
 * non-directory in the live tree), so it cannot conflict either way. O(update), not
 * O(tree): what stage checks.
 */
export function typeConflictPaths(update: UpdatePaths, mergedDir: string): string[] {
  const out = new Set<string>();
  for (const p of [...update.changed.keys(), ...update.removed]) {
    if (!isUnder(p, mergedDir)) continue;
    out.add(p);
    for (let i = p.lastIndexOf('/'); i >= mergedDir.length; i = p.lastIndexOf('/', i - 1)) out.add(p.slice(0, i));
  }
  return [...out].sort(comparePaths);
}

export class MergePlanner {
  private readonly plan: MergePlan = { actions: [], keep: [], conflicts: [], typeConflicts: [], carried: 0 };
  private readonly sortedChanged: string[];
  /** A subtree an earlier action removed from the new tree: rows below it need nothing. */
  private gone: string | null = null;

  constructor(private readonly update: UpdatePaths, private readonly mergedDir: string) {
    this.sortedChanged = [...update.changed.keys()].sort(comparePaths);
  }

  add(row: Row): void {
    const { p, b, n, l } = row;
    if (this.gone !== null) {
      if (isUnder(p, this.gone)) return;
      this.gone = null;
    }
    if (isUpdateStamp(p, this.mergedDir)) {
      if (n !== null) this.plan.actions.push({ kind: 'remove', path: p });
      return;
    }
    // FIFOs and sockets are not configuration: never merged (as ostree).
    if (l?.t === 'o' || n?.t === 'o') return;
    if (sameEntry(l, n)) return;
    const decided = this.decided(p);
    if (decided !== 'none') {
      if (sameEntry(l, b)) return; // no local change: the update's version stands
      if (decided === 'self' && l !== null && n !== null && isDir(l) !== isDir(n)) {
        this.plan.typeConflicts.push({ path: p, local: kind(l), update: kind(n) });
        return;
      }
      if (l !== null) this.plan.keep.push(p);
      this.plan.conflicts.push({ path: p, kept: l !== null });
      return;
    }
    // Not the update's: the running system's version is the target.
    if (l === null) {
      if (isDir(n) && this.updateBelow(p)) {
        // Deleted locally, but the update writes below it: the directory stays for the update's entries.
        this.plan.conflicts.push({ path: p, kept: false });
        return;
      }
      this.plan.actions.push({ kind: 'remove', path: p });
      this.gone = p;
      this.plan.carried += 1;
      return;
    }
    if (!isDir(l) && isDir(n) && this.updateBelow(p)) {
      this.plan.typeConflicts.push({ path: p, local: kind(l), update: `${kind(n)} (the update writes below it)` });
      return;
    }
    const replace = n !== null && isDir(n) !== isDir(l);
    this.plan.actions.push({ kind: 'carry', path: p, replace });
    if (replace && isDir(n)) this.gone = p;
    this.plan.carried += 1;
  }

  result(): MergePlan {
    return this.plan;
  }

  /** 'self': the update wrote or removed `p`; 'ancestor': it removed a parent or made one a non-directory. */
  private decided(p: string): 'self' | 'ancestor' | 'none' {
    if (this.update.changed.has(p) || this.update.removed.has(p)) return 'self';
    for (let i = p.lastIndexOf('/'); i > 0; i = p.lastIndexOf('/', i - 1)) {
      const a = p.slice(0, i);
      if (this.update.removed.has(a)) return 'ancestor';
      const t = this.update.changed.get(a);
      if (t !== undefined && t !== 'd') return 'ancestor';
    }
    return 'none';
  }

  /** True when the update wrote something strictly below `p`. */
  private updateBelow(p: string): boolean {
    const xs = this.sortedChanged;
    let lo = 0;
    let hi = xs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (comparePaths(xs[mid]!, p) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo < xs.length && isUnder(xs[lo]!, p);
  }
}

/** Plans the merge of one directory from its rows (in manifest order). */
export function planMerge(rows: Iterable<Row>, update: UpdatePaths, mergedDir: string): MergePlan {
  const planner = new MergePlanner(update, mergedDir);
  for (const r of rows) planner.add(r);
  return planner.result();
}
