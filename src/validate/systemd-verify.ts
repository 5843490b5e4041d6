import * as path from 'node:path';
import { StagedrootError, type Issue } from '../errors.js';
import { listDir } from '../fs/durable.js';
import { RootFs } from '../fs/root-fs.js';
import { ScratchDir } from '../fs/scratch-dir.js';
import { runCommand, describeOutcome } from '../util/run-command.js';
import { classifySystemdOutput, type ClassifiedOutput } from './systemd-output.js';
import type { ValidationContext } from './types.js';
import { templateNameOf } from '../sources/ignition/unit-names.js';

/** Where system units and their drop-ins live in a tree (etc/ overrides usr/lib/). */
export const UNIT_DIRS = ['etc/systemd/system', 'usr/lib/systemd/system'] as const;
const UNIT_FILE = /^[^/]+\.(service|socket|device|mount|automount|swap|target|path|timer|slice|scope)$/;
const DROPIN = /^([^/]+\.(?:service|socket|device|mount|automount|swap|target|path|timer|slice|scope))\.d\/[^/]+\.conf$/;

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

/** Unit files and drop-ins under UNIT_DIRS among the changed paths (regular files only: links are aliases or masks). */
export function unitsToVerify(tree: string, delta: readonly string[]): UnitsToVerify {
  const root = new RootFs(tree);
  const files = new Set<string>();
  const orphans = new Set<string>();
  const isFile = (rel: string, follow: boolean): string | null => {
    try {
      const r = root.resolve(rel, { followLast: follow });
      return r.stat?.isFile() ? r.hostPath : null;
    } catch {
      return null;
    }
  };
  for (const p of delta) {
    const dir = UNIT_DIRS.find((d) => p.startsWith(d + '/'));
    if (dir === undefined) continue;
    const rest = p.slice(dir.length + 1);
    if (UNIT_FILE.test(rest)) {
      const host = isFile(p, false);
      if (host) files.add(host);
      continue;
    }
    const m = DROPIN.exec(rest);
    if (!m || isFile(p, true) === null) continue;
    const unit = m[1]!;
    const template = templateNameOf(unit);
    const fragment = UNIT_DIRS.flatMap((d) => [`${d}/${unit}`, `${d}/${template}`]).map((f) => isFile(f, true)).find((h) => h !== null);
    if (fragment) files.add(fragment);
    else if (!unitIsMasked(root, unit)) orphans.add(unit);
  }
  return { files: [...files].sort(), orphanDropins: [...orphans].sort() };
}

function unitIsMasked(root: RootFs, unit: string): boolean {
  return UNIT_DIRS.some((d) => {
    try {
      return root.resolve(`${d}/${unit}`).stat?.isSymbolicLink() === true && root.resolve(`${d}/${unit}`, { followLast: true }).rel === 'dev/null';
    } catch {
      return false;
    }
  });
}

/**
 * Built-in validator: the unit files and drop-ins the update changed, checked by
 * `systemd-analyze verify --root=TREE` in one invocation (plus one for drop-ins whose
 * unit the tree does not ship, parsed against a stub unit in a scratch root). Its
 * output is classified by the rule documented in systemd-output.ts.
 */
export async function verifySystemdUnits(ctx: ValidationContext, o: SystemdVerifyOptions = {}): Promise<Issue[]> {
  const { files, orphanDropins } = unitsToVerify(ctx.tree, ctx.delta);
  if (files.length === 0 && orphanDropins.length === 0) return [];
  const tool = o.tool ?? 'systemd-analyze';
  const timeoutMs = o.timeoutMs ?? 120_000;
  const root = new RootFs(ctx.tree);
  const issues: Issue[] = [];

  const commandDirInTree = (cmd: string): boolean => {
    try {
      return root.resolve(path.posix.dirname(cmd), { followLast: true }).stat?.isDirectory() === true;
    } catch {
      return false;
    }
  };
  const osUnitsInTree = ((): boolean => {
    try {
      return root.resolve('usr/lib/systemd/system', { followLast: true }).stat?.isDirectory() === true;
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
        scratch.write(`etc/systemd/system/${unit}`, '[Unit]\nDescription=stub: stagedroot checks the drop-ins of a unit this tree does not ship\n');
        for (const d of UNIT_DIRS) {
          for (const name of listDirIn(root, `${d}/${unit}.d`)) {
            const rel = `${d}/${unit}.d/${name}`;
            if (!name.endsWith('.conf')) continue;
            const data = safeRead(root, rel);
            if (data !== null) scratch.write(rel, data);
          }
        }
        names.set(unit, `etc/systemd/system/${unit}`);
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

/** Names in a tree directory, resolved inside the root ([] when absent). */
export function listDirIn(root: RootFs, rel: string): string[] {
  try {
    const r = root.resolve(rel, { followLast: true });
    return r.stat !== null && r.stat.isDirectory() ? listDir(r.hostPath) : [];
  } catch {
    return [];
  }
}

function safeRead(root: RootFs, rel: string): Buffer | null {
  try {
    return root.readFile(rel);
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
