import type { StageProgress } from '../stage/stage.js';
import type { Io } from './io.js';

export function mb(n: number): string {
  return `${(n / 1e6).toFixed(1)} MB`;
}

/** A bar of 30 characters, `frac` of it filled. */
export function bar(frac: number): string {
  return '#'.repeat(Math.round(Math.min(1, frac) * 30)).padEnd(30, '.');
}

/**
 * One line redrawn in place on stderr (a terminal's), at most every 100 ms unless `now`
 * says the line is final; `clear` wipes it (before other output, and at the end).
 */
export function redrawnLine(io: Io): { draw: (text: string, now?: boolean) => void; clear: () => void; readonly drawn: boolean } {
  let last = 0;
  let drawn = false;
  return {
    draw(text, now = false) {
      const t = Date.now();
      if (t - last < 100 && !now) return;
      last = t;
      io.err(`\r${text}\x1b[K`);
      drawn = true;
    },
    clear() {
      if (drawn) io.err('\r\x1b[K');
      drawn = false;
    },
    get drawn() {
      return drawn;
    },
  };
}

/**
 * A one-line progress bar on stderr when it is a terminal; silent otherwise (hooks and
 * pipes get clean output). Redraws at most every 100 ms.
 */
export function progressBar(io: Io): { update: (p: StageProgress) => void; done: () => void } {
  if (!io.errIsTty) return { update: () => {}, done: () => {} };
  const line = redrawnLine(io);
  return {
    update(p) {
      const shown = p.total ? bar(p.done / p.total) : '~'.repeat(30);
      const count = p.total ? `${p.done}/${p.total}` : `${p.done}`;
      line.draw(`[${shown}] ${p.phase.padEnd(8)} ${count} ${p.bytes ? mb(p.bytes) : ''}`, p.done === p.total);
    },
    done: () => line.clear(),
  };
}
