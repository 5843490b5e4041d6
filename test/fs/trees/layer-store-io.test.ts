import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readLines } from '../../../src/fs/trees/layer-store-io.js';

/**
 * readLines decodes each 64 KiB chunk's whole lines at once and keeps the partial line
 * for the next: the lines are those of the file split at every newline (empty ones
 * included, no empty last one after a final newline), whatever falls on a chunk's edge:
 * a line longer than the buffer, a UTF-8 character cut by it, a file with no final newline.
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'read-lines-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function lines(text: string | Buffer): string[] {
  const f = path.join(dir, `f-${Math.random().toString(16).slice(2)}`);
  fs.writeFileSync(f, text);
  return [...readLines(f)];
}

describe('readLines', () => {
  it('splits at every newline, as String.split does without the empty tail', () => {
    expect(lines('')).toEqual([]);
    expect(lines('a')).toEqual(['a']);
    expect(lines('a\n')).toEqual(['a']);
    expect(lines('a\n\nb\n')).toEqual(['a', '', 'b']);
    expect(lines('\n')).toEqual(['']);
    expect(lines('a\nb')).toEqual(['a', 'b']);
  });

  it('reads lines across chunk edges: lines longer than the buffer, multi-byte characters cut by an edge', () => {
    const long = 'x'.repeat(200_000);
    const wide = 'é€😀'.repeat(30_000); // 2, 3 and 4 bytes: some cut at a 64 KiB edge
    const many = Array.from({ length: 5000 }, (_, i) => `{"t":"f","p":"usr/${'ü'.repeat(i % 7)}${i}"}`);
    const all = [long, 'short', wide, '', ...many, long + 'y'];
    expect(lines(all.join('\n') + '\n')).toEqual(all);
    expect(lines(all.join('\n'))).toEqual(all);
  });
});
