import { Readable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as zlib from 'node:zlib';
import { StagedrootError } from '../../errors.js';

export type Compression = 'none' | 'gzip' | 'zstd';

const MAGICS: [string, number[]][] = [
  ['xz', [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]],
  ['bzip2', [0x42, 0x5a, 0x68]],
  ['lz4', [0x04, 0x22, 0x4d, 0x18]],
];

/** The compression of an archive, from its first bytes (never from its name). */
export function compressionOf(head: Buffer, where: string): Compression {
  if (head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  for (const [name, magic] of MAGICS) {
    if (magic.every((b, i) => head[i] === b)) {
      throw new StagedrootError('SOURCE_UNSUPPORTED', `${where} is ${name}-compressed; stagedroot reads tar, tar.gz and tar.zst layers`, { path: where });
    }
  }
  return 'none';
}

/**
 * Decompresses a chunk stream, pulled: the decompressor only runs when the tar reader
 * asks for bytes, and stopping early (end of archive, a rejected entry) stops it.
 *
 * zstd: node-tar 7 reads zstd only through Node's own zlib zstd (Node >= 22.15); on an
 * older Node the `zstd` tool decompresses instead, fed through a pipe (the archive is
 * still read through the one file descriptor the source opened).
 */
export function decompress(chunks: AsyncIterable<Buffer>, c: Compression, where: string): AsyncIterable<Buffer> {
  if (c === 'none') return chunks;
  // Output in 256 KiB chunks, not zlib's 16 KiB: an image layer's tens of MB came out in thousands of chunks, and their
  // stream round trips were ~1.6 s of a first install's main thread (20,000 files, 56 MB of tar); 0.2 s with these.
  if (c === 'gzip') return through(chunks, zlib.createGunzip({ chunkSize: 256 << 10 }), where, 'gzip');
  const native = (zlib as unknown as { createZstdDecompress?: () => Duplex }).createZstdDecompress;
  if (typeof native === 'function') return through(chunks, native(), where, 'zstd');
  return zstdTool(chunks, where);
}

async function* through(chunks: AsyncIterable<Buffer>, t: Duplex, where: string, name: string): AsyncGenerator<Buffer> {
  const input = Readable.from(chunks);
  const piped = pipeline(input, t).catch(() => {}); // errors surface through t's iterator below
  try {
    for await (const c of t) yield c as Buffer;
  } catch (err) {
    if (err instanceof StagedrootError) throw err;
    throw new StagedrootError('SOURCE_CORRUPT', `${where} is not valid ${name} data: ${(err as Error).message}`, { path: where, cause: err });
  } finally {
    input.destroy();
    t.destroy();
    await piped;
  }
}

async function* zstdTool(chunks: AsyncIterable<Buffer>, where: string): AsyncGenerator<Buffer> {
  const { execa } = await import('execa'); // loaded by the first zstd layer, not by every import of the library
  const proc = execa('zstd', ['-d', '-c', '-q'], { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe', buffer: { stdout: false }, reject: false });
  const input = Readable.from(chunks);
  let inputError: unknown;
  const piped = pipeline(input, proc.stdin!).catch((err: unknown) => {
    if ((err as { code?: string }).code !== 'EPIPE' && (err as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE') inputError = err;
  });
  let finished = false;
  try {
    for await (const c of proc.stdout!) yield c as Buffer;
    finished = true;
  } finally {
    // Stopped early (end of archive, a rejection): the rest is not decompressed at all.
    input.destroy();
    if (!finished) {
      proc.kill();
      await proc;
      await piped;
    }
  }
  const r = await proc;
  await piped;
  if (inputError instanceof StagedrootError) throw inputError;
  if (r.failed) {
    if ((r as { code?: string }).code === 'ENOENT') {
      throw new StagedrootError('TOOL_MISSING', `${where} is zstd-compressed: this Node.js (${process.version}) has no zstd and the zstd tool is not installed`, { path: where });
    }
    throw new StagedrootError('SOURCE_CORRUPT', `${where} is not valid zstd data: ${String(r.stderr ?? '').trim() || `zstd exited with ${r.exitCode}`}`, { path: where });
  }
}
