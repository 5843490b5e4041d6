import type { Issue } from '../errors.js';
import { UNIT_SUFFIXES } from '../systemd/unit-names.js';

/**
 * What `systemd-analyze verify --root=TREE` prints, turned into issues by one rule:
 *
 *   every line is an ERROR, unless it is bare-tree noise (DROPPED) or advisory (WARNING).
 *
 * A staged tree is a directory, not a running system, and often not a whole OS (a test
 * tree, a config-only image). What that alone causes is noise (checked against systemd
 * 252; the checker also runs with --man=no and --recursive-errors=no, which keeps most
 * of it from being printed at all):
 *
 *   missing-dependency  "<unit>: Failed to create <unit>/start: Unit sysinit.target not found."
 *                       Dependency resolution needs the whole unit set of a running system;
 *                       a Wants= of an absent unit is legal. Syntax is what is checked here.
 *   command-not-in-tree "<unit>: Command /usr/bin/x is not executable: No such file or directory"
 *                       when /usr/bin (the command's DIRECTORY) does not exist in the tree:
 *                       the tree does not ship that part of the OS. When the directory
 *                       exists but the command does not, the unit would fail at start: kept.
 *   service-not-in-tree "<x>.socket: service x.service not loaded, socket cannot be started."
 *                       when the tree has no usr/lib/systemd/system at all: it ships no OS
 *                       units, so a socket for an OS-provided service cannot find it here.
 *                       When the tree ships OS units and the service is not among them
 *                       (nor in etc/), the socket would fail at start: kept.
 *   man-page            "Command 'man foo(8)' failed": man pages are not part of a root tree.
 *   stub-unit           a unit-level line about a stub unit, made up so that a drop-in whose
 *                       unit the tree does not ship can be parsed (its own lines are kept).
 *
 * Advisory (kept as warnings, the stage goes on): systemd's own "Proceeding anyway." and
 * "this is not safe!" lines (a world-writable or executable unit file, User=nobody).
 *
 * Everything else — "Unknown section", "Unknown key", "Invalid section header", "Assignment
 * outside of section", "Service has no ExecStart=... Refusing.", "has a bad unit file
 * setting", "failed to load properly", unknown lines — is an error: an unknown message is
 * never silently dropped.
 */
export type NoiseRule = 'missing-dependency' | 'command-not-in-tree' | 'service-not-in-tree' | 'man-page' | 'stub-unit';

export interface OutputContext {
  /** Tree-relative path of a host path printed by systemd (null when not in the tree). */
  treePathOf(host: string): string | null;
  /** Tree-relative path of a unit name ("" when unknown). */
  unitPathOf(unit: string): string;
  /** Does this absolute command path's directory exist inside the tree? */
  commandDirInTree(command: string): boolean;
  /** Does the tree ship OS units (a usr/lib/systemd/system directory)? */
  osUnitsInTree: boolean;
  /** Units that are stubs (their unit-level lines are noise). */
  stubUnits: ReadonlySet<string>;
}

export interface ClassifiedOutput {
  issues: Issue[];
  dropped: { line: string; rule: NoiseRule }[];
}

const UNIT_NAME = String.raw`[^\s/:]+\.(?:${UNIT_SUFFIXES.join('|')})`;
const FILE_LINE = /^(\/.+?):(\d+): (.*)$/;
const UNIT_PREFIX = new RegExp(`^(${UNIT_NAME}): (.*)$`);
const UNIT_SENTENCE = new RegExp(`^Unit (${UNIT_NAME}) (.*)$`);
const MISSING_DEP = new RegExp(`^Failed to create ${UNIT_NAME}/[a-z-]+: Unit ${UNIT_NAME} not found\\.?$`);
const NOT_EXECUTABLE = /^Command (\/\S+) is not executable: No such file or directory$/;
const MAN_PAGE = /^Command 'man .*' failed/;
const SERVICE_NOT_LOADED = /^service \S+ not loaded, socket cannot be started\.$/;
const ADVISORY = /(Proceeding anyway\.|this is not safe!)$/;

export function classifySystemdOutput(output: string, ctx: OutputContext): ClassifiedOutput {
  const issues: Issue[] = [];
  const dropped: ClassifiedOutput['dropped'] = [];
  for (const raw of output.split('\n')) {
    const line = raw.trimEnd();
    if (line.trim() === '' || line.startsWith('[... ')) continue;
    let path = '';
    let message = line;
    let unit: string | null = null;
    let m: RegExpExecArray | null;
    if ((m = FILE_LINE.exec(line))) {
      path = ctx.treePathOf(m[1]!) ?? m[1]!;
      message = `line ${m[2]}: ${m[3]}`;
    } else if ((m = UNIT_PREFIX.exec(line))) {
      unit = m[1]!;
      message = m[2]!;
    } else if ((m = UNIT_SENTENCE.exec(line))) {
      unit = m[1]!;
    }
    if (unit !== null) path = ctx.unitPathOf(unit);

    const rule = noiseRule(unit, message, ctx);
    if (rule) {
      dropped.push({ line, rule });
      continue;
    }
    const advisory = ADVISORY.test(message);
    issues.push({
      code: advisory ? 'SYSTEMD_UNIT_WARNING' : 'SYSTEMD_UNIT_INVALID',
      path,
      message: `systemd-analyze: ${unit !== null && !message.includes(unit) ? `${unit}: ` : ''}${message}`,
      severity: advisory ? 'warning' : 'error',
    });
  }
  return { issues, dropped };
}

function noiseRule(unit: string | null, message: string, ctx: OutputContext): NoiseRule | null {
  if (unit !== null && ctx.stubUnits.has(unit)) return 'stub-unit';
  if (MISSING_DEP.test(message)) return 'missing-dependency';
  if (MAN_PAGE.test(message)) return 'man-page';
  if (SERVICE_NOT_LOADED.test(message) && !ctx.osUnitsInTree) return 'service-not-in-tree';
  const ne = NOT_EXECUTABLE.exec(message);
  if (ne && !ctx.commandDirInTree(ne[1]!)) return 'command-not-in-tree';
  return null;
}
