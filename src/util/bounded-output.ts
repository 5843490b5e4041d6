/** Default bound for captured command output (validators, health checks). */
export const OUTPUT_LIMIT = 64 * 1024;

/**
 * Collects a stream's bytes keeping at most `limit` of them: the first half and the
 * last half, with a marker saying how much was dropped in between. The start says what
 * a command was doing, the end usually says why it failed; a chatty command can never
 * exhaust memory or bloat the state file.
 */
export class BoundedOutput {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private dropped = 0;

  constructor(readonly limit = OUTPUT_LIMIT) {}

  push(chunk: Buffer | string): void {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const half = Math.floor(this.limit / 2);
    if (this.headBytes < half) {
      const take = Math.min(half - this.headBytes, buf.length);
      this.head.push(buf.subarray(0, take));
      this.headBytes += take;
      buf = buf.subarray(take);
    }
    if (buf.length === 0) return;
    this.tail.push(buf);
    this.tailBytes += buf.length;
    const keep = this.limit - half;
    while (this.tailBytes > keep) {
      const first = this.tail[0]!;
      const excess = this.tailBytes - keep;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailBytes -= first.length;
        this.dropped += first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
        this.dropped += excess;
      }
    }
  }

  /** Total bytes seen. */
  get total(): number {
    return this.headBytes + this.tailBytes + this.dropped;
  }

  toString(): string {
    const head = Buffer.concat(this.head).toString('utf8');
    const tail = Buffer.concat(this.tail).toString('utf8');
    return this.dropped > 0 ? `${head}\n[... ${this.dropped} bytes of output dropped ...]\n${tail}` : head + tail;
  }
}

/** Bounds a string the same way (for joining several captured outputs). */
export function boundText(text: string, limit = OUTPUT_LIMIT): string {
  const b = new BoundedOutput(limit);
  b.push(text);
  return b.toString();
}
