import * as path from 'node:path';
import { StagedrootError, type Issue } from '../errors.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { ScratchDir } from '../fs/core/scratch-dir.js';
import { runCommand, describeOutcome } from '../util/run-command.js';
import { classifySystemdOutput, type ClassifiedOutput } from './systemd-output.js';
import type { ValidationContext } from './types.js';
import { classifyUnitPath, findUnitFile, isMaskedIn, UNIT_DIR, unitDirsIn, VENDOR_UNIT_DIR } from '../systemd/unit-dirs.js';
import { templateNameOf } from '../systemd/unit-names.js';

export interface SystemdVerifyOptions {
  /** The tool to run (default "systemd-analyze" from PATH). */
  tool?: string;
  /** Per invocation (default 120 s). */
  timeoutMs?: number;
}

/** The units an update changed, split into those the tree ships and drop-ins whose unit it does not. */
export interface UnitsToVerify {
  /** Host paths of unit files to verify. */
  files: string[];
  /** Unit names with changed drop-ins but no unit file in the tree. */
  orphanDropins: string[];
}

/** Unit files and drop-ins of the unit search path among the changed paths (regular files only: links are aliases or masks). */
export function unitsToVerify(tree: ReadOnlyTree, delta: readonly string[]): UnitsToVerify {
  const files = new Set<string>();
  const orphans = new Set<string>();
  const hostOfFile = (rel: string, follow: boolean): string | null => {
    try {
      const r = tree.resolve(rel, { followLast: follow });
      return r?.stat?.isFile() ? r.hostPath : null;
    } catch {
      return null;
    }
  };
  for (const p of delta) {
    const u = classifyUnitPath(p);
    if (u === null) continue;
    if (u.kind === 'unit') {
      const host = hostOfFile(p, false);
      if (host) files.add(host);
      continue;
    }
    if (hostOfFile(p, true) === null) continue;
    const fragment = findUnitFile(tree, u.unit);
    if (fragment !== null) files.add(hostOfFile(fragment, true)!);
    else if (!isMaskedIn(tree, u.unit)) orphans.add(u.unit);
  }
  return { files: [...files].sort(), orphanDropins: [...orphans].sort() };
}

/**
 * Built-in validator: the unit files and drop-ins the update changed, checked by
 * `systemd-analyze verify --root=TREE` in one invocation (plus one for drop-ins whose
 * unit the tree does not ship, parsed against a stub unit in a scratch root). Its
 * output is classified by the rule documented in systemd-output.ts.
 */
export async function verifySystemdUnits(ctx: ValidationContext, o: SystemdVerifyOptions = {}): Promise<Issue[]> {
  const { files, orphanDropins } = unitsToVerify(ctx.staged, ctx.delta);
  if (files.length === 0 && orphanDropins.length === 0) return [];
  const tool = o.tool ?? 'systemd-analyze';
  const timeoutMs = o.timeoutMs ?? 120_000;
  const tree = ctx.staged;
  const issues: Issue[] = [];

  const commandDirInTree = (cmd: string): boolean => {
    try {
      return tree.stat(path.posix.dirname(cmd))?.isDirectory() === true;
    } catch {
      return false;
    }
  };
  const osUnitsInTree = ((): boolean => {
    try {
      return tree.stat(VENDOR_UNIT_DIR)?.isDirectory() === true;
    } catch {
      return false;
    }
  })();
  const unitPathOf = (base: string, names: Map<string, string>) => (unit: string): string => names.get(unit) ?? names.get(templateNameOf(unit)) ?? base;

  if (files.length > 0) {
    const names = new Map(files.map((f) => [path.basename(f), path.relative(ctx.tree, f)]));
    const out = await run(tool, ctx.tree, files, timeoutMs, ctx.signal, files.length);
    const c = classifySystemdOutput(out, {
      treePathOf: (h) => (h.startsWith(ctx.tree + '/') ? h.slice(ctx.tree.length + 1) : null),
      unitPathOf: unitPathOf('', names),
      commandDirInTree,
      osUnitsInTree,
      stubUnits: new Set(),
    });
    issues.push(...c.issues);
  }

  if (orphanDropins.length > 0) {
    const scratch = new ScratchDir('stagedroot-unit-stub-');
    try {
      const names = new Map<string, string>();
      for (const unit of orphanDropins) {
        scratch.write(`${UNIT_DIR}/${unit}`, '[Unit]\nDescription=stub: stagedroot checks the drop-ins of a unit this tree does not ship\n');
        for (const d of unitDirsIn(tree)) {
          for (const name of listDirIn(tree, `${d}/${unit}.d`)) {
            const rel = `${d}/${unit}.d/${name}`;
            if (!name.endsWith('.conf')) continue;
            const data = safeRead(tree, rel);
            if (data !== null) scratch.write(rel, data);
          }
        }
        names.set(unit, `${UNIT_DIR}/${unit}`);
      }
      const out = await run(tool, scratch.path, orphanDropins, timeoutMs, ctx.signal, orphanDropins.length);
      const c: ClassifiedOutput = classifySystemdOutput(out, {
        treePathOf: (h) => (h.startsWith(scratch.path + '/') ? h.slice(scratch.path.length + 1) : null),
        unitPathOf: unitPathOf('', names),
        commandDirInTree,
        osUnitsInTree,
        stubUnits: new Set(orphanDropins),
      });
      issues.push(...c.issues);
    } finally {
      scratch.remove();
    }
  }
  return issues;
}

/** Names in a tree directory, resolved inside the root ([] when absent or unresolvable). */
export function listDirIn(tree: ReadOnlyTree, rel: string): string[] {
  try {
    return tree.readdir(rel) ?? [];
  } catch {
    return [];
  }
}

function safeRead(tree: ReadOnlyTree, rel: string): Buffer | null {
  try {
    return tree.readFile(rel);
  } catch {
    return null;
  }
}

async function run(tool: string, rootDir: string, units: string[], timeoutMs: number, signal: AbortSignal | undefined, count: number): Promise<string> {
  const r = await runCommand(
    { file: tool, args: ['verify', '--man=no', '--recursive-errors=no', `--root=${rootDir}`, ...units], display: `${tool} verify` },
    { timeoutMs, signal, env: { SYSTEMD_LOG_COLOR: '0', SYSTEMD_LOG_LOCATION: '0', SYSTEMD_LOG_TIME: '0', SYSTEMD_PAGER: 'cat', LC_ALL: 'C' } },
  );
  if (r.notRunnable) {
    throw new StagedrootError(
      'TOOL_MISSING',
      `${tool} (from systemd) is needed to check the ${count} unit${count === 1 ? '' : 's'} this update changes, and it cannot be run: ${r.notRunnable}. Install systemd, or switch the check off (builtins.systemdVerify: false, --no-verify-units)`,
      { value: tool },
    );
  }
  if (r.timedOut || r.signal) {
    return `${r.output}\n${tool} verify ${describeOutcome(r, timeoutMs)}`;
  }
  if (r.exitCode !== 0 && r.output.trim() === '') return `${tool} verify exited ${r.exitCode} without saying why`;
  return r.output;
}
