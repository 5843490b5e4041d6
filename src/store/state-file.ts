import { StagedrootError, isStagedrootError } from '../errors.js';
import { parseJsonState } from '../util/json-state.js';
import { type DurableFs } from '../fs/trees/durable.js';
import { exists, readText } from '../fs/core/host-paths.js';
import type { Layout } from '../state/layout.js';
import { checkState } from '../state/invariants.js';
import { stateSchema, type State } from '../state/schema.js';

export interface LoadedState {
  state: State;
  /** Set when state.json was unreadable and the last good copy was used. */
  recoveredFrom?: string;
  brokenReason?: string;
}

/**
 * The last state text the schema accepted, and what it parsed to (as JSON: the state is
 * plain JSON data). One `boot` reads the same state.json five times (the open, recovery,
 * the transition's recovery, the boot record's check, the view): the schema checks a text
 * once; the same text again is parsed from the accepted output, a fresh object each time.
 * A text the schema rejects is never kept, so it is checked (and rejected) at every read.
 */
let accepted: { text: string; output: string } | undefined;

function parse(text: string, file: string): { ok: true; state: State } | { ok: false; reason: string } {
  if (accepted?.text === text) return { ok: true, state: JSON.parse(accepted.output) as State };
  try {
    const state = parseJsonState(text, file, stateSchema, 'state');
    accepted = { text, output: JSON.stringify(state) };
    return { ok: true, state };
  } catch (err) {
    if (isStagedrootError(err)) return { ok: false, reason: err.message };
    throw err;
  }
}

/**
 * Reads the state. A corrupt state.json is never silently reset: the last good copy
 * (state.json.bak) is used and the caller told so; with no good copy, STATE_CORRUPT
 * names the file.
 */
export function loadState(layout: Layout): LoadedState {
  const main = readText(layout.stateFile);
  if (main === null && !exists(layout.stateBackup)) {
    throw new StagedrootError('NOT_A_SYSROOT', `${layout.root} is not a stagedroot sysroot (no state.json); create one with \`stagedroot init\``, { path: layout.root });
  }
  if (main !== null) {
    const r = parse(main, layout.stateFile);
    if (r.ok) return { state: r.state };
    const bak = readText(layout.stateBackup);
    const b = bak === null ? null : parse(bak, layout.stateBackup);
    if (b?.ok) return { state: b.state, recoveredFrom: layout.stateBackup, brokenReason: r.reason };
    throw new StagedrootError('STATE_CORRUPT', `The state file is corrupt and there is no good copy: ${r.reason}${b && !b.ok ? `; ${b.reason}` : ''}`, { path: layout.stateFile });
  }
  const bak = readText(layout.stateBackup)!;
  const b = parse(bak, layout.stateBackup);
  if (b.ok) return { state: b.state, recoveredFrom: layout.stateBackup, brokenReason: `${layout.stateFile} is missing` };
  throw new StagedrootError('STATE_CORRUPT', `state.json is missing and the copy is corrupt: ${b.reason}`, { path: layout.stateBackup });
}

/**
 * Writes the state: state.json by one atomic rename (the commit point), then the copy.
 * Every write is checked first, against the schema and the invariants (INVARIANT_VIOLATED).
 */
export function saveState(layout: Layout, dfs: DurableFs, state: State): void {
  const checked = stateSchema.parse(state);
  checkState(checked);
  const text = JSON.stringify(checked, null, 2) + '\n';
  dfs.writeFileAtomic(layout.stateFile, text);
  dfs.writeFileAtomic(layout.stateBackup, text);
}
