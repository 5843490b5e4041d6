/**
 * Builds the image of each crash state of a plan (states.ts) from the base image the log
 * starts from: a cursor image holds the log's first entries up to the lowest prefix no
 * later state goes below, and each state is a copy of it with the rest of its entries.
 * One per replay check (replay.check.ts for the sysroot's filesystems, esp.check.ts for
 * the ESP).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { applyEntries, type WriteLog } from './log-writes.js';
import type { CrashState } from './states.js';

function cp(from: string, to: string): void {
  execFileSync('cp', ['--sparse=always', from, to], { stdio: ['ignore', 'pipe', 'pipe'] });
}

export class StateImages {
  private readonly cursor: { img: string; at: number };
  /** For each state (in the plan's order), the prefix no later state goes below. */
  private readonly floor: number[];

  constructor(
    private readonly log: WriteLog,
    private readonly logFd: number,
    base: string,
    work: string,
    states: readonly CrashState[],
  ) {
    this.cursor = { img: path.join(work, 'cursor.img'), at: 0 };
    cp(base, this.cursor.img);
    this.floor = states.map((s) => s.prefix);
    for (let i = this.floor.length - 2; i >= 0; i--) this.floor[i] = Math.min(this.floor[i]!, this.floor[i + 1]!);
  }

  /** Builds state number `i` of the plan (`s`) at `img`; states are built in the plan's order. */
  build(i: number, s: CrashState, img: string): void {
    const floor = this.floor[i]!;
    if (floor > this.cursor.at) {
      const fd = fs.openSync(this.cursor.img, 'r+');
      applyEntries(this.log, this.logFd, fd, this.log.entries.slice(this.cursor.at, floor));
      // On the disk before cp reads it for holes (SEEK_DATA), whatever the host's writeback.
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      this.cursor.at = floor;
    }
    this.again(s, img);
  }

  /** Builds a state again (to keep its image) without moving the cursor: `s` must be the last one built. */
  again(s: CrashState, img: string): void {
    cp(this.cursor.img, img);
    const fd = fs.openSync(img, 'r+');
    try {
      applyEntries(this.log, this.logFd, fd, this.log.entries.slice(this.cursor.at, s.prefix));
      applyEntries(this.log, this.logFd, fd, s.extra);
    } finally {
      fs.closeSync(fd);
    }
  }
}
