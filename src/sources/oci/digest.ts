import { createHash, type Hash } from 'node:crypto';
import { StagedrootError } from '../../errors.js';

/** Where a blob lives in an OCI layout. */
export function blobPath(digest: string): string {
  const [alg, hex] = digest.split(':');
  return `blobs/${alg}/${hex}`;
}

export function hasherFor(digest: string): Hash {
  return createHash(digest.slice(0, digest.indexOf(':')));
}

export function digestOf(data: Buffer, alg = 'sha256'): string {
  return `${alg}:${createHash(alg).update(data).digest('hex')}`;
}

/**
 * A blob's bytes, hashed and counted as they stream. The consumer may stop early (a tar
 * reader stops at the end-of-archive blocks): `finish` then reads the rest from the
 * same stream and checks the digest and size of the whole blob. More bytes than the
 * declared size stop the stream at once (a blob cannot grow into a bomb).
 */
export class VerifiedStream implements AsyncIterable<Buffer> {
  private readonly it: AsyncIterator<Buffer>;
  private readonly hash: Hash;
  private bytes = 0;
  private done = false;

  constructor(source: AsyncIterable<Buffer>, private readonly digest: string, private readonly size: number | null, private readonly name: string) {
    this.it = source[Symbol.asyncIterator]();
    this.hash = hasherFor(digest);
  }

  private async pull(): Promise<IteratorResult<Buffer>> {
    if (this.done) return { done: true, value: undefined };
    const r = await this.it.next();
    if (r.done) {
      this.done = true;
      return r;
    }
    this.bytes += r.value.length;
    if (this.size !== null && this.bytes > this.size) {
      throw new StagedrootError('SOURCE_CORRUPT', `${this.name} is larger than the ${this.size} bytes its descriptor declares`, { path: this.name, digest: this.digest });
    }
    this.hash.update(r.value);
    return r;
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: () => this.pull(),
      // Stopping the consumer does not stop the blob: finish() reads the rest.
      return: async () => ({ done: true, value: undefined }),
    };
  }

  /** Reads what is left and checks size and digest; closes the source. */
  async finish(): Promise<void> {
    try {
      while (!(await this.pull()).done);
    } finally {
      await this.it.return?.();
    }
    if (this.size !== null && this.bytes !== this.size) {
      throw new StagedrootError('SOURCE_CORRUPT', `${this.name} is ${this.bytes} bytes, not the ${this.size} its descriptor declares (truncated or replaced)`, { path: this.name, digest: this.digest });
    }
    const got = `${this.digest.slice(0, this.digest.indexOf(':'))}:${this.hash.digest('hex')}`;
    if (got !== this.digest) {
      throw new StagedrootError('SOURCE_CORRUPT', `${this.name} does not match its digest: its content hashes to ${got}`, { path: this.name, digest: this.digest });
    }
  }

  /** Stops without checking (the caller is already failing). */
  async abandon(): Promise<void> {
    await this.it.return?.();
  }
}
