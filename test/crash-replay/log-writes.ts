/**
 * The dm-log-writes log format (the kernel's drivers/md/dm-log-writes.c and
 * Documentation/admin-guide/device-mapper/log-writes.rst), read on the host, and the
 * replay of its entries onto a copy of the device the log started from.
 *
 * Layout of the log device: sector 0 holds the super block (magic, version, nr_entries,
 * sectorsize); from sector 1 on, each entry is one sector of header (sector, nr_sectors,
 * flags, data_len; a mark's name follows the header in the same sector) and then, for a
 * write, nr_sectors sectors of the data written. Sectors are the logged device's logical
 * block size. Writes are logged in the order they completed; a FLUSH entry comes after
 * every write that completed before the flush was issued, so everything before a FLUSH
 * (and a FUA write itself) is on the disk once that entry is reached, and the writes
 * between two flushes may reach the disk in any subset.
 */
import * as fs from 'node:fs';

export const LOG_FLUSH = 1 << 0;
export const LOG_FUA = 1 << 1;
export const LOG_DISCARD = 1 << 2;
export const LOG_MARK = 1 << 3;
export const LOG_METADATA = 1 << 4;

const MAGIC = 0x6a736677736872n;
const VERSION = 1n;
const HEADER_BYTES = 32;
/** Large writes and discards are copied in pieces of this size. */
const CHUNK = 8 << 20;

export interface LogEntry {
  /** Position in the log (0-based). */
  index: number;
  /** First sector written on the logged device, in `sectorSize` units. */
  sector: number;
  nrSectors: number;
  flags: number;
  /** A mark's name. */
  mark: string | null;
  /** Byte offset of the entry's data in the log device (writes only). */
  dataOffset: number;
}

export interface WriteLog {
  sectorSize: number;
  entries: LogEntry[];
}

function readAt(fd: number, offset: number, length: number): Buffer {
  const buf = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const n = fs.readSync(fd, buf, done, length - done, offset + done);
    if (n === 0) throw new Error(`log-writes: the log ends at byte ${offset + done}, ${length - done} bytes short`);
    done += n;
  }
  return buf;
}

/** Reads the super block and every entry's header (not the data). */
export function readLog(logPath: string): WriteLog {
  const fd = fs.openSync(logPath, 'r');
  try {
    const sb = readAt(fd, 0, HEADER_BYTES);
    const magic = sb.readBigUInt64LE(0);
    if (magic !== MAGIC) throw new Error(`log-writes: ${logPath} has no log-writes super block (magic ${magic.toString(16)})`);
    const version = sb.readBigUInt64LE(8);
    if (version !== VERSION) throw new Error(`log-writes: ${logPath}: version ${version}, this reader knows ${VERSION}`);
    const count = Number(sb.readBigUInt64LE(16));
    const sectorSize = sb.readUInt32LE(24);
    if (sectorSize < 512 || (sectorSize & (sectorSize - 1)) !== 0) throw new Error(`log-writes: ${logPath}: sector size ${sectorSize}`);
    const entries: LogEntry[] = [];
    let pos = sectorSize;
    for (let index = 0; index < count; index++) {
      const head = readAt(fd, pos, sectorSize);
      const sector = Number(head.readBigUInt64LE(0));
      const nrSectors = Number(head.readBigUInt64LE(8));
      const flags = Number(head.readBigUInt64LE(16));
      const dataLen = Number(head.readBigUInt64LE(24));
      const mark = flags & LOG_MARK ? head.subarray(HEADER_BYTES, HEADER_BYTES + dataLen).toString('utf8') : null;
      pos += sectorSize;
      entries.push({ index, sector, nrSectors, flags, mark, dataOffset: pos });
      // A discard carries no data; a mark's name is in its header sector.
      if (!(flags & (LOG_DISCARD | LOG_MARK))) pos += nrSectors * sectorSize;
    }
    return { sectorSize, entries };
  } finally {
    fs.closeSync(fd);
  }
}

/** An entry after which the disk holds everything logged before it: a FLUSH or a FUA write. */
export function isFlushPoint(e: LogEntry): boolean {
  return (e.flags & (LOG_FLUSH | LOG_FUA)) !== 0;
}

/** Whether an entry changes the disk's content (a write with data, or a discard). */
export function writesData(e: LogEntry): boolean {
  return !(e.flags & LOG_MARK) && e.nrSectors > 0;
}

/**
 * Applies entries (in the order given) to the device image `imgFd`: a write copies its
 * data from the log, a discard zeroes its range (what a discarding disk may return).
 */
export function applyEntries(log: WriteLog, logFd: number, imgFd: number, entries: Iterable<LogEntry>): number {
  let applied = 0;
  for (const e of entries) {
    if (!writesData(e)) continue;
    const bytes = e.nrSectors * log.sectorSize;
    const at = e.sector * log.sectorSize;
    for (let off = 0; off < bytes; off += CHUNK) {
      const n = Math.min(CHUNK, bytes - off);
      const data = e.flags & LOG_DISCARD ? Buffer.alloc(n) : readAt(logFd, e.dataOffset + off, n);
      let done = 0;
      while (done < n) done += fs.writeSync(imgFd, data, done, n - done, at + off + done);
    }
    applied++;
  }
  return applied;
}
