import { SourceFile } from '../fs/core/file-chunks.js';
import type { SignedPayload } from './verify.js';

/** A file as a signed payload, streamed from one open descriptor that must not change while read. */
export function filePayload(p: string, describe = p): SignedPayload {
  return {
    describe,
    async *chunks() {
      const file = SourceFile.open(p);
      try {
        yield* file.chunks();
        file.assertUnchanged();
      } finally {
        file.close();
      }
    },
  };
}

/** Bytes already read (an image's manifest blob, checked against its digest) as a signed payload. */
export function bytesPayload(data: Buffer, describe: string): SignedPayload {
  return {
    describe,
    async *chunks() {
      yield data;
    },
  };
}
