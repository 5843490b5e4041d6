/**
 * The dm-log-writes reader and the crash-state planner on a log written here byte by byte
 * in the kernel's format (drivers/md/dm-log-writes.c): the guest's real logs are checked by
 * `npm run test:crash-replay`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LOG_DISCARD, LOG_FLUSH, LOG_FUA, LOG_MARK, applyEntries, readLog } from './log-writes.js';
import { planStates } from './states.js';

const SECTOR = 512;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'log-writes-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

interface RawEntry {
  sector?: number;
  data?: Buffer;
  nrSectors?: number;
  flags?: number;
  mark?: string;
}

/** A log device image as the kernel writes it: super block, then header sector + data per entry. */
function writeLog(file: string, entries: RawEntry[]): void {
  const parts: Buffer[] = [];
  const sb = Buffer.alloc(SECTOR);
  sb.writeBigUInt64LE(0x6a736677736872n, 0);
  sb.writeBigUInt64LE(1n, 8);
  sb.writeBigUInt64LE(BigInt(entries.length), 16);
  sb.writeUInt32LE(SECTOR, 24);
  parts.push(sb);
  for (const e of entries) {
    const head = Buffer.alloc(SECTOR);
    const nr = e.data ? e.data.length / SECTOR : (e.nrSectors ?? 0);
    head.writeBigUInt64LE(BigInt(e.sector ?? 0), 0);
    head.writeBigUInt64LE(BigInt(nr), 8);
    head.writeBigUInt64LE(BigInt((e.flags ?? 0) | (e.mark !== undefined ? LOG_MARK : 0)), 16);
    head.writeBigUInt64LE(BigInt(e.mark?.length ?? 0), 24);
    if (e.mark !== undefined) head.write(e.mark, 32);
    parts.push(head);
    if (e.data) parts.push(e.data);
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}

const fill = (byte: number, sectors: number): Buffer => Buffer.alloc(sectors * SECTOR, byte);

describe('dm-log-writes log', () => {
  const logFile = path.join(tmp, 'log.img');
  writeLog(logFile, [
    { sector: 2, data: fill(0xaa, 2) }, // 0
    { flags: LOG_FLUSH }, // 1
    { mark: 'one' }, // 2
    { sector: 0, data: fill(0xbb, 1) }, // 3
    { sector: 5, data: fill(0xcc, 1) }, // 4
    { sector: 3, nrSectors: 2, flags: LOG_DISCARD }, // 5: no data follows
    { sector: 7, data: fill(0xdd, 1), flags: LOG_FLUSH | LOG_FUA }, // 6
    { sector: 6, data: fill(0xee, 1) }, // 7: after the last flush point
  ]);

  it('reads the entries, their flags, marks and where their data is', () => {
    const log = readLog(logFile);
    expect(log.sectorSize).toBe(SECTOR);
    expect(log.entries.map((e) => [e.sector, e.nrSectors, e.flags, e.mark])).toEqual([
      [2, 2, 0, null],
      [0, 0, LOG_FLUSH, null],
      [0, 0, LOG_MARK, 'one'],
      [0, 1, 0, null],
      [5, 1, 0, null],
      [3, 2, LOG_DISCARD, null],
      [7, 1, LOG_FLUSH | LOG_FUA, null],
      [6, 1, 0, null],
    ]);
    // super, header, 2 data sectors, then one header each for the flush and the mark.
    expect(log.entries[3]!.dataOffset).toBe(7 * SECTOR);
    // The discard's header is followed directly by the next entry's.
    expect(log.entries[6]!.dataOffset).toBe(log.entries[5]!.dataOffset + SECTOR);
  });

  it('replays writes and zeroes discarded ranges', () => {
    const log = readLog(logFile);
    const img = path.join(tmp, 'dev.img');
    fs.writeFileSync(img, fill(0x11, 8));
    const fd = fs.openSync(img, 'r+');
    const logFd = fs.openSync(logFile, 'r');
    expect(applyEntries(log, logFd, fd, log.entries)).toBe(6);
    fs.closeSync(fd);
    fs.closeSync(logFd);
    const got = fs.readFileSync(img);
    const sectorByte = (n: number): number[] => [...new Set(got.subarray(n * SECTOR, (n + 1) * SECTOR))];
    expect([0, 1, 2, 3, 4, 5, 6, 7].map(sectorByte)).toEqual([[0xbb], [0x11], [0xaa], [0], [0], [0xcc], [0xee], [0xdd]]);
  });

  it('refuses a device without a log-writes super block', () => {
    const bad = path.join(tmp, 'bad.img');
    fs.writeFileSync(bad, fill(0, 2));
    expect(() => readLog(bad)).toThrow(/no log-writes super block/);
  });

  it('plans the base, every flush point, subsets of the unflushed writes before it, and every mark', () => {
    const log = readLog(logFile);
    const plan = planStates(log, { budget: 100, subsets: 4, seed: 1 });
    expect(plan.flushPoints).toBe(2);
    expect(plan.checkedPoints).toBe(2);
    const names = plan.states.map((s) => s.name);
    expect(names[0]).toBe('base');
    expect(names).toContain('flush@1');
    expect(names).toContain('flush@6');
    expect(names).toContain('mark@2:one');
    const subsets = plan.states.filter((s) => s.name.startsWith('subset@6'));
    expect(subsets.length).toBeGreaterThan(0);
    for (const s of subsets) {
      // On top of everything up to the flush before; a proper, non-empty part of writes 3, 4, 5.
      expect(s.prefix).toBe(2);
      expect(s.extra.length).toBeGreaterThan(0);
      expect(s.extra.length).toBeLessThan(3);
      expect(s.extra.every((e) => [3, 4, 5].includes(e.index))).toBe(true);
      // The mark logged after the flush is reached: its synced writes came before it.
      expect(s.marksReached).toEqual(['one']);
    }
    expect(plan.states.find((s) => s.name === 'flush@1')!.marksReached).toEqual([]);
    // The same seed plans the same states; a budget of one keeps the last flush point.
    expect(planStates(log, { budget: 100, subsets: 4, seed: 1 })).toEqual(plan);
    const one = planStates(log, { budget: 1, subsets: 0, seed: 1 });
    expect(one.checkedPoints).toBe(1);
    expect(one.states.map((s) => s.name)).toEqual(['base', 'mark@2:one', 'flush@6']);
  });
});
