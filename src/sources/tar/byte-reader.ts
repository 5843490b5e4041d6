/**
 * Pulls bytes from an async chunk stream on demand: exact reads for headers, slices for
 * bodies. Nothing is read ahead beyond the chunk being consumed, so the producer (a
 * file, a decompressor) is paused whenever the consumer is, and memory stays at about
 * one chunk. `onPull` sees the running total of bytes taken from the source (the cap
 * against decompression bombs lives there).
 */
export class ByteReader {
  private readonly it: AsyncIterator<Uint8Array>;
  private readonly queue: Buffer[] = [];
  private available = 0;
  private ended = false;
  /** Bytes taken from the source so far. */
  pulled = 0;
  /** Bytes consumed by the caller so far (the position in the stream). */
  offset = 0;

  constructor(source: AsyncIterable<Uint8Array>, private readonly onPull: (total: number) => void) {
    this.it = source[Symbol.asyncIterator]();
  }

  private async more(): Promise<boolean> {
    if (this.ended) return false;
    const r = await this.it.next();
    if (r.done) {
      this.ended = true;
      return false;
    }
    const c = Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength);
    this.pulled += c.length;
    this.onPull(this.pulled);
    if (c.length > 0) {
      this.queue.push(c);
      this.available += c.length;
    }
    return true;
  }

  /** Takes up to n bytes from the front of the queue (at most one chunk's worth). */
  private take(n: number): Buffer {
    const head = this.queue[0]!;
    const c = head.length <= n ? this.queue.shift()! : head.subarray(0, n);
    if (c !== head) this.queue[0] = head.subarray(n);
    this.available -= c.length;
    this.offset += c.length;
    return c;
  }

  /**
   * Exactly n bytes; null when the source ended before the first of them; 'short'
   * (after consuming what there was) when it ended in the middle.
   */
  async exact(n: number): Promise<Buffer | null | 'short'> {
    while (this.available < n) {
      if (!(await this.more())) {
        if (this.available === 0) return null;
        while (this.available > 0) this.take(this.available);
        return 'short';
      }
    }
    if (this.queue[0]!.length >= n) return this.take(n);
    const parts: Buffer[] = [];
    let need = n;
    while (need > 0) {
      const c = this.take(need);
      parts.push(c);
      need -= c.length;
    }
    return Buffer.concat(parts, n);
  }

  /** The next n bytes as slices; calls `short` (which throws) if the source ends first. */
  async *slices(n: number, short: () => never): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.available === 0 && !(await this.more())) short();
      if (this.available === 0) continue;
      const c = this.take(left);
      left -= c.length;
      yield c;
    }
  }

  /** Skips n bytes; false if the source ended first. */
  async skip(n: number): Promise<boolean> {
    let left = n;
    while (left > 0) {
      if (this.available === 0 && !(await this.more())) return false;
      if (this.available === 0) continue;
      left -= this.take(left).length;
    }
    return true;
  }

  /** Stops the source (closes the file, kills the decompressor) without reading the rest. */
  async close(): Promise<void> {
    this.ended = true;
    await this.it.return?.();
  }
}
