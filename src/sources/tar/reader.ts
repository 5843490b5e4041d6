import type { Header } from 'tar';
import { StagedrootError } from '../../errors.js';
import { ByteReader } from './byte-reader.js';
import type { LayerLimits } from '../layer/entry-checks.js';
import type { LayerEntry, LayerEntryKind } from '../layer/entry.js';
import { hasRawBytes, nameFromBytes } from '../../fs/core/names.js';
import { checkGlobalPaxRecords, checkPaxRecords, takeXattrRecords } from './pax-records.js';

/** node-tar's cap on one extended header; a longer one is an attack, not a long name. */
export const MAX_META_BYTES = 1024 * 1024;

const KINDS: Record<string, LayerEntryKind> = {
  File: 'file',
  OldFile: 'file',
  ContiguousFile: 'file',
  Directory: 'dir',
  GNUDumpDir: 'dir',
  SymbolicLink: 'symlink',
  Link: 'hardlink',
  CharacterDevice: 'char-device',
  BlockDevice: 'block-device',
  FIFO: 'fifo',
};

type Ex = Record<string, unknown> | undefined;

/**
 * Reads a tar stream entry by entry, pulling bytes only as the consumer asks. Header
 * decoding is node-tar's (Header, Pax, ReadEntry: the same field semantics as its
 * Parser, base-256 numbers, GNU long names, PAX overrides); the framing is done here,
 * pull-based, instead of through node-tar's push Parser, because:
 * - a push parser buffers whatever it is fed while an entry is not being consumed
 *   (and everything after the end-of-archive blocks): here the source is simply not
 *   read until the consumer wants the next bytes, so there is no backpressure to get
 *   wrong and reading stops at the end-of-archive marker;
 * - raw extended headers are visible before node-tar's lenient parser normalises
 *   them (see pax-records.ts);
 * - every problem that node-tar only warns about (bad checksum, invalid or negative
 *   size, truncation, oversized or ignored extended headers) is a typed error here.
 * Each yielded entry's `open()` streams its body; whatever the consumer leaves unread
 * is skipped when the next entry is asked for.
 */
export async function* readTarEntries(source: AsyncIterable<Uint8Array>, where: string, limits: LayerLimits): AsyncGenerator<LayerEntry> {
  // node-tar is loaded by the first read, not by every verb that imports the sources (a stage of an Ignition config reads no tar).
  const { Header, Pax, ReadEntry } = await import('tar');
  let current = '(start of archive)';
  const br = new ByteReader(source, (total) => {
    if (total > limits.maxBytes) {
      throw new StagedrootError('UNSAFE_ENTRY', `${where} decompresses to more than ${limits.maxBytes} bytes (limit maxBytes), reading ${current}`, { path: current, option: 'maxBytes', value: limits.maxBytes });
    }
  });
  const corrupt = (why: string, path = current): never => {
    throw new StagedrootError('SOURCE_CORRUPT', `${where} is corrupt: ${why}`, { path });
  };
  const truncated = (): never => corrupt(`it ends in the middle of ${JSON.stringify(current)} (truncated)`);
  let ex: Ex;
  let xattrs: [string, Buffer][] | undefined;
  let rawPath: Buffer | undefined;
  let rawLinkpath: Buffer | undefined;
  let sawNull = false;
  let headers = 0;
  try {
    for (;;) {
      const at = br.offset;
      const block = await br.exact(512);
      if (block === null) break; // no end-of-archive marker: tolerated, as GNU tar and node-tar do
      if (block === 'short') return truncated();
      if (isZero(block)) {
        if (sawNull) break; // end of archive: whatever follows is not read at all
        sawNull = true;
        continue;
      }
      sawNull = false;
      if (++headers > limits.maxEntries) {
        throw new StagedrootError('UNSAFE_ENTRY', `${where} has more than ${limits.maxEntries} entries (limit maxEntries)`, { path: rawName(block), option: 'maxEntries', value: limits.maxEntries });
      }
      let h: Header;
      try {
        h = new Header(block, 0, ex);
      } catch (err) {
        return corrupt(`the header at byte ${at} (${JSON.stringify(rawName(block))}) cannot be decoded: ${(err as Error).message}`, rawName(block));
      }
      current = typeof h.path === 'string' && h.path !== '' ? h.path : rawName(block);
      if (!h.cksumValid) {
        return corrupt(at === 0 ? 'it is not a tar archive (the first header has a bad checksum)' : `the header at byte ${at} (${JSON.stringify(current)}) has a bad checksum`);
      }
      if (!h.path) return corrupt(`the header at byte ${at} has an empty name`);
      if (h.size === undefined || !Number.isSafeInteger(h.size) || h.size < 0) {
        const neg = (block[124]! & 0xff) === 0xff ? ' (a negative base-256 number)' : '';
        return corrupt(`the entry ${JSON.stringify(current)} has an invalid size${neg}`);
      }
      const size = h.size;
      const padding = (512 - (size % 512)) % 512;
      const type = h.type;

      if (type === 'ExtendedHeader' || type === 'OldExtendedHeader' || type === 'GlobalExtendedHeader' || type === 'NextFileHasLongPath' || type === 'OldGnuLongPath' || type === 'NextFileHasLongLinkpath') {
        if (size > MAX_META_BYTES) {
          throw new StagedrootError('UNSAFE_ENTRY', `${where} has a ${size}-byte ${type} header at ${JSON.stringify(current)} (limit ${MAX_META_BYTES})`, { path: current });
        }
        const body = size === 0 ? Buffer.alloc(0) : await br.exact(size);
        if (body === null || body === 'short' || !(await br.skip(padding))) return truncated();
        if (type === 'NextFileHasLongPath' || type === 'OldGnuLongPath' || type === 'NextFileHasLongLinkpath') {
          const value = gnuLongName(body, current, where);
          ex ??= Object.create(null) as Record<string, unknown>;
          ex[type === 'NextFileHasLongLinkpath' ? 'linkpath' : 'path'] = value;
          const bytes = body.subarray(0, body.indexOf(0) === -1 ? body.length : body.indexOf(0));
          if (type === 'NextFileHasLongLinkpath') rawLinkpath = bytes;
          else rawPath = bytes;
        } else {
          if (type === 'GlobalExtendedHeader') {
            // A comment only (checkGlobalPaxRecords): nothing in it applies to any entry.
            checkGlobalPaxRecords(body, where, current);
            continue;
          }
          checkPaxRecords(body, where, paxPathGuess(body) ?? current);
          const { rest, xattrs: found, rawPath: rp, rawLinkpath: rl } = takeXattrRecords(body);
          ex = Pax.parse(rest.toString('utf8'), ex as never, false) as unknown as Ex;
          // Attributes belong to the next entry only.
          if (found.length > 0) xattrs = found;
          if (rp !== undefined) rawPath = rp;
          if (rl !== undefined) rawLinkpath = rl;
        }
        continue;
      }

      const re = new ReadEntry(h, ex as never);
      ex = undefined;
      const entryXattrs = xattrs;
      xattrs = undefined;
      // Names are bytes: node-tar decodes them as UTF-8, turning what is not into U+FFFD;
      // such a name is taken again from its bytes (PAX record, GNU long name or header).
      // A PAX path that is not UTF-8 (what Go's archive/tar, so umoci, writes) is dropped by
      // node-tar's parser (its length no longer matches once decoded): its bytes win.
      const entryPath = paxBytes(rawPath) ?? byteName(re.path, rawPath ?? ustarName(block));
      const entryLinkpath = paxBytes(rawLinkpath) ?? byteName(re.linkpath, rawLinkpath ?? ustarField(block, 157, 100));
      rawPath = rawLinkpath = undefined;
      current = typeof re.path === 'string' ? re.path : current;
      const kind = KINDS[type] ?? 'unsupported';
      let consumed = 0;
      let opened = false;
      const entry: LayerEntry = {
        path: entryPath,
        kind,
        typeName: type === 'Unsupported' ? `with code ${JSON.stringify(String.fromCharCode(block[156]!))}` : type,
        size: kind === 'file' ? size : 0,
        mode: re.mode,
        uid: re.uid,
        gid: re.gid,
        mtime: re.mtime instanceof Date ? re.mtime.getTime() / 1000 : undefined,
        linkpath: entryLinkpath,
        offset: br.offset,
      };
      if (entryXattrs !== undefined) entry.xattrs = entryXattrs;
      if (kind === 'file') {
        entry.open = () => {
          if (opened) throw new StagedrootError('IO', `The content of ${JSON.stringify(current)} was read twice`, { path: current });
          opened = true;
          return (async function* () {
            for await (const c of br.slices(size - consumed, truncated)) {
              consumed += c.length;
              yield c;
            }
          })();
        };
      }
      yield entry;
      if (!(await br.skip(size - consumed))) return truncated();
      // The body is complete: a stream that ends in its padding ends the archive there.
      // umoci 0.4.7's `insert` writes layers so (umoci#436); Go and Python read them too.
      if (!(await br.skip(padding))) break;
    }
  } finally {
    await br.close();
  }
}

function isZero(b: Buffer): boolean {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

/** The name field of a raw header, for messages about headers that cannot be decoded. */
function rawName(block: Buffer): string {
  const end = block.indexOf(0);
  return block.toString('utf8', 0, end === -1 || end > 100 ? 100 : end);
}

/** A GNU long name: NUL-padded; a NUL inside would be silently cut by node-tar. */
function gnuLongName(body: Buffer, current: string, where: string): string {
  const s = body.toString('utf8').replace(/\0+$/, '');
  if (s.includes('\0')) {
    throw new StagedrootError('PATH_ESCAPE', `${where} is rejected: the GNU long name at ${JSON.stringify(current)} contains a NUL byte: ${JSON.stringify(s)}`, { path: s });
  }
  return s;
}

function paxPathGuess(body: Buffer): string | undefined {
  const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'));
  return m?.[1];
}

/** A NUL-terminated header field's bytes. */
function ustarField(block: Buffer, off: number, len: number): Buffer {
  const f = block.subarray(off, off + len);
  const end = f.indexOf(0);
  return end === -1 ? f : f.subarray(0, end);
}

/** The name of a ustar header as bytes: prefix "/" name. */
function ustarName(block: Buffer): Buffer {
  const name = ustarField(block, 0, 100);
  const magic = block.toString('latin1', 257, 263);
  const prefix = magic === 'ustar\0' ? ustarField(block, 345, 155) : Buffer.alloc(0);
  return prefix.length > 0 ? Buffer.concat([prefix, Buffer.from('/'), name]) : name;
}

/** node-tar's decoded name, or the name from its bytes when decoding lost some (U+FFFD). */
function byteName(decoded: unknown, bytes: Buffer): unknown {
  if (typeof decoded !== 'string' || !decoded.includes('\ufffd')) return decoded;
  return nameFromBytes(bytes);
}

/** A name's bytes as a tree path when they are not UTF-8 (else undefined: node-tar's decoding stands). */
function paxBytes(bytes: Buffer | undefined): string | undefined {
  if (bytes === undefined) return undefined;
  const s = nameFromBytes(bytes);
  return hasRawBytes(s) ? s : undefined;
}
