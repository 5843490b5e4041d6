import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cloneFile, copyFileInto, createFile } from '../../../src/fs/core/new-entry.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-new-entry-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A file outside the tree that a symlink in the tree points at: it must never be written. */
function victim(): string {
  const v = path.join(dir, 'victim');
  fs.writeFileSync(v, 'keep\n');
  return v;
}

describe('the calls that make a new entry', () => {
  it('createFile makes a new file only: an existing file or a symlink is EEXIST, nothing followed or truncated', () => {
    const fd = createFile(path.join(dir, 'new'));
    fs.writeSync(fd, 'x');
    fs.closeSync(fd);
    expect(fs.readFileSync(path.join(dir, 'new'), 'utf8')).toBe('x');
    expect(() => createFile(path.join(dir, 'new'))).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    const v = victim();
    fs.symlinkSync(v, path.join(dir, 'link'));
    expect(() => createFile(path.join(dir, 'link'))).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(fs.readFileSync(v, 'utf8')).toBe('keep\n');
  });

  it('cloneFile copies the content to a new name, and refuses a name that exists (a symlink there is not followed)', () => {
    const src = path.join(dir, 'src');
    fs.writeFileSync(src, 'content\n');
    cloneFile(src, path.join(dir, 'copy'));
    expect(fs.readFileSync(path.join(dir, 'copy'), 'utf8')).toBe('content\n');
    expect(fs.statSync(path.join(dir, 'copy')).ino).not.toBe(fs.statSync(src).ino);
    const v = victim();
    fs.symlinkSync(v, path.join(dir, 'link'));
    expect(() => cloneFile(src, path.join(dir, 'link'))).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(fs.readFileSync(v, 'utf8')).toBe('keep\n');
  });

  it('copyFileInto reads a regular file only: a symlink or a FIFO in its place is an IO error, not followed or read', () => {
    const src = path.join(dir, 'src');
    fs.writeFileSync(src, 'a'.repeat(5000));
    const out = path.join(dir, 'out');
    const fd = createFile(out);
    try {
      expect(copyFileInto(src, fd, 'src', Buffer.alloc(1024))).toBe(5000); // a small buffer: several chunks
      fs.symlinkSync(victim(), path.join(dir, 'link'));
      expect(() => copyFileInto(path.join(dir, 'link'), fd, 'link')).toThrow(expect.objectContaining({ code: 'IO', path: 'link' }));
      expect(spawnSync('mkfifo', [path.join(dir, 'fifo')]).status).toBe(0);
      expect(() => copyFileInto(path.join(dir, 'fifo'), fd, 'fifo')).toThrow(expect.objectContaining({ code: 'IO', message: 'fifo is no longer a regular file' }));
    } finally {
      fs.closeSync(fd);
    }
    expect(fs.readFileSync(out, 'utf8')).toBe('a'.repeat(5000));
  });
});
