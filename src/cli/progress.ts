import type { StageProgress } from '../stage/stage.js';
import type { Io } from './io.js';

function mb(n: number): string {
  return `${(n / 1e6).toFixed(1)} MB`;
}

/**
 * A one-line progress bar on stderr when it is a terminal; silent otherwise (hooks and
 * pipes get clean output). Redraws at most every 100 ms.
 */
export function progressBar(io: Io): { update: (p: StageProgress) => void; done: () => void } {
  if (!io.errIsTty) return { update: () => {}, done: () => {} };
  let last = 0;
  let drawn = false;
  return {
    update(p) {
      const now = Date.now();
      if (now - last < 100 && p.done !== p.total) return;
      last = now;
      const width = 30;
      const frac = p.total ? Math.min(1, p.done / p.total) : 0;
      const bar = p.total ? '#'.repeat(Math.round(frac * width)).padEnd(width, '.') : '~'.repeat(width);
      const count = p.total ? `${p.done}/${p.total}` : `${p.done}`;
      io.err(`\r[${bar}] ${p.phase.padEnd(8)} ${count} ${p.bytes ? mb(p.bytes) : ''}\x1b[K`);
      drawn = true;
    },
    done() {
      if (drawn) io.err('\r\x1b[K');
    },
  };
}
