/**
 * Which crash states a log yields, in log order: the base itself; the prefix up to every
 * flush point (a FLUSH or FUA entry: what the disk holds for sure once it completed); for
 * each flush point, a few random subsets of the writes logged since the last FLUSH before
 * it (the unflushed stretch: a power cut keeps any of them, in any order, but every FUA
 * write that completed); and the prefix
 * up to every mark (where the tree hashes and the /var files are taken from).
 */
import { LOG_FLUSH, LOG_FUA, isFlushPoint, writesData, type LogEntry, type WriteLog } from './log-writes.js';
import { prng } from '../helpers/random.js';

export interface CrashState {
  /** A stable name: `base`, `flush@ENTRY`, `subset@ENTRY#N`, `mark@ENTRY:NAME`. */
  name: string;
  /** The state is the log's first `prefix` entries... */
  prefix: number;
  /** ...plus these entries after them (a subset of the unflushed stretch), or none. */
  extra: LogEntry[];
  /** The marks whose synced /var writes the state must hold (those the durable prefix reached). */
  marksReached: string[];
  /** A mark state: the tree hashes later states are compared with are taken here. */
  mark: string | null;
}

export interface Plan {
  flushPoints: number;
  /** The flush points whose states (and subsets) are in `states`. */
  checkedPoints: number;
  states: CrashState[];
}

/**
 * `budget`: how many flush points to check (a seeded sample that always keeps the last one;
 * all when it is at least their number). `subsets`: random subsets per checked flush point.
 */
export function planStates(log: WriteLog, o: { budget: number; subsets: number; seed: number }): Plan {
  const entries = log.entries;
  const points = entries.filter(isFlushPoint).map((e) => e.index);
  const rand = prng(o.seed);
  let chosen = new Set(points);
  if (o.budget < points.length) {
    const pool = points.slice(0, -1);
    for (let i = pool.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    chosen = new Set([...pool.slice(0, Math.max(0, o.budget - 1)), points.at(-1)!]);
  }
  const marks = entries.filter((e) => e.mark !== null);
  const reachedBy = (prefix: number): string[] => marks.filter((m) => m.index < prefix).map((m) => m.mark!);
  const states: CrashState[] = [{ name: 'base', prefix: 0, extra: [], marksReached: [], mark: null }];
  // The last FLUSH entry: every write logged before it is on the disk.
  let lastFlush = -1;
  for (const e of entries) {
    if (e.mark !== null) {
      states.push({ name: `mark@${e.index}:${e.mark}`, prefix: e.index + 1, extra: [], marksReached: reachedBy(e.index + 1), mark: e.mark });
      continue;
    }
    if (!isFlushPoint(e)) continue;
    if (chosen.has(e.index)) {
      // A mark's /var file was synced before the mark: the flush that made it durable is
      // logged before the mark, so every mark before this point is reached by its subsets too.
      const stretch = entries.slice(lastFlush + 1, e.index).filter(writesData);
      const optional = stretch.filter((x) => !(x.flags & LOG_FUA));
      const seen = new Set<string>();
      for (let n = 0; n < o.subsets && optional.length > 1; n++) {
        const drop = new Set(optional.filter(() => rand() < 0.5));
        const key = [...drop].map((x) => x.index).join(',');
        if (drop.size === 0 || drop.size === optional.length || seen.has(key)) continue;
        seen.add(key);
        // FUA writes are on the disk once they completed: kept in every subset.
        states.push({ name: `subset@${e.index}#${n}`, prefix: lastFlush + 1, extra: stretch.filter((x) => !drop.has(x)), marksReached: reachedBy(e.index), mark: null });
      }
      states.push({ name: `flush@${e.index}`, prefix: e.index + 1, extra: [], marksReached: reachedBy(e.index + 1), mark: null });
    }
    if (e.flags & LOG_FLUSH) lastFlush = e.index;
  }
  return { flushPoints: points.length, checkedPoints: chosen.size, states };
}

function intEnv(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  if (!/^\d+$/.test(v)) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return Number(v);
}

/** planStates' options from the environment: STAGEDROOT_REPLAY_BUDGET (default: every point), _SUBSETS (default 2; `subsets` overrides it), _SEED (482). */
export function planOptionsFromEnv(o: { subsets?: number } = {}): { budget: number; subsets: number; seed: number } {
  return {
    budget: intEnv('STAGEDROOT_REPLAY_BUDGET', Number.MAX_SAFE_INTEGER),
    subsets: o.subsets ?? intEnv('STAGEDROOT_REPLAY_SUBSETS', 2),
    seed: intEnv('STAGEDROOT_REPLAY_SEED', 482),
  };
}
