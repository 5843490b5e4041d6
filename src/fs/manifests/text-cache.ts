/**
 * What was made from a file's text the last time it was read, kept for the next reader
 * that reads the same text (keyed by the text, not a stat: the file is read every time,
 * only what is made from it is saved), a few files at a time: a long-lived library user
 * does not keep every deployment's. The overlay's parses and its lookups keep one each.
 */
export class TextCache<T> {
  private readonly kept = new Map<string, { text: string; value: T }>();

  constructor(private readonly max: number) {}

  /** What was made from `text` for `file`, or undefined. */
  peek(file: string, text: string): T | undefined {
    const had = this.kept.get(file);
    return had !== undefined && had.text === text ? had.value : undefined;
  }

  /** What was made from `text` for `file`, else `make(text)`, kept as the file's newest. */
  get(file: string, text: string, make: (text: string) => T): T {
    const had = this.peek(file, text);
    if (had !== undefined) return had;
    const value = make(text);
    this.kept.delete(file);
    this.kept.set(file, { text, value });
    if (this.kept.size > this.max) this.kept.delete(this.kept.keys().next().value!);
    return value;
  }
}
