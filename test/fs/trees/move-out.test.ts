/**
 * RootFs.moveOut keeps names as bytes at both ends (a shared directory's path, or a name
 * below it, that is not UTF-8), by one rename or, across filesystems, by the copy that
 * replaces it; through a dry run's memory layer the entry only leaves the layer.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { OverlayIo } from '../../../src/fs/trees/overlay-io.js';
import { hashTree } from '../../../src/testing/index.js';
import { mountTmpfs, whyNoTmpfs } from '../../helpers/mounts.js';

const L = Buffer.from('caf\xe9', 'latin1');
const ESC = 'caf\udce9';
const at = (...parts: (string | Buffer)[]): Buffer => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const tempDir = (under: string, name: string): string => {
  const d = fs.mkdtempSync(path.join(under, name));
  made.push(d);
  return d;
};

/** A tree with srv/café/ holding café (a file), a hardlink to it, a FIFO and a subdirectory. */
function makeTree(under: string): string {
  const tree = tempDir(under, 'stagedroot-move-out-');
  const dir = at(tree, '/srv/', L);
  fs.mkdirSync(dir, { recursive: true });
  fs.mkdirSync(at(dir, '/sub'));
  fs.writeFileSync(at(dir, '/sub/', L), 'inner\n');
  fs.linkSync(at(dir, '/sub/', L), at(dir, '/hard'));
  fs.chmodSync(dir, 0o750);
  fs.utimesSync(dir, 1e9, 1e9);
  return tree;
}

function expectMoved(tree: string, dst: Buffer): void {
  expect(fs.existsSync(at(tree, '/srv/', L))).toBe(false);
  expect(fs.readFileSync(at(dst, '/sub/', L), 'utf8')).toBe('inner\n');
  expect(fs.statSync(at(dst, '/hard')).ino).toBe(fs.statSync(at(dst, '/sub/', L)).ino); // the hardlink kept
  const st = fs.statSync(dst);
  expect(st.mode & 0o7777).toBe(0o750);
  expect(Math.round(st.mtimeMs / 1000)).toBe(1e9);
}

describe('RootFs.moveOut over names that are not UTF-8', () => {
  it('moves srv/café to shared/café by one rename (same filesystem)', () => {
    const tree = makeTree(os.tmpdir());
    const shared = tempDir(os.tmpdir(), 'stagedroot-move-out-shared-');
    const touched: string[] = [];
    new RootFs(tree, { onTouch: (e) => touched.push(`${e.kind} ${e.path}`) }).moveOut(`srv/${ESC}`, `${shared}/${ESC}`);
    expectMoved(tree, at(shared, '/', L));
    expect(touched).toEqual([`remove srv/${ESC}`]);
  });

  // Across filesystems for certain: the tree on a tmpfs of its own (skipped, saying why, where none can be mounted).
  const noTmpfs = whyNoTmpfs();
  if (noTmpfs) console.warn(`SKIPPED the EXDEV case of test/fs/trees/move-out.test.ts: ${noTmpfs}`);
  it.skipIf(noTmpfs !== null)('moves it across filesystems (EXDEV: the copy that keeps what cp -a keeps), names as bytes, the original gone', () => {
    const other = mountTmpfs(os.tmpdir());
    try {
      const tree = makeTree(other.mnt);
      const shared = tempDir(os.tmpdir(), 'stagedroot-move-out-shared-');
      expect(fs.statSync(tree).dev).not.toBe(fs.statSync(shared).dev);
      new RootFs(tree).moveOut(`srv/${ESC}`, `${shared}/${ESC}`);
      expectMoved(tree, at(shared, '/', L));
      expect(fs.readdirSync(shared, { encoding: 'buffer' }).map((b) => b.toString('hex'))).toEqual([L.toString('hex')]); // no temp left
    } finally {
      other.cleanup();
    }
  });

  it('through a dry run\'s memory layer: the entry leaves the layer, nothing is written on the disk', () => {
    const tree = makeTree(os.tmpdir());
    const shared = tempDir(os.tmpdir(), 'stagedroot-move-out-shared-');
    const before = hashTree(tree);
    const io = new OverlayIo(tree);
    const root = new RootFs(tree, { io });
    root.moveOut(`srv/${ESC}`, `${shared}/${ESC}`);
    expect(root.lstat(`srv/${ESC}`)).toBeNull();
    expect(root.readOnly().readdir('srv')).toEqual([]);
    root.mkdir(`srv/${ESC}`, { mode: 0o755 }); // the mount point a stage leaves
    expect(root.lstat(`srv/${ESC}`)?.isDirectory()).toBe(true);
    expect(hashTree(tree)).toBe(before);
    expect(fs.readdirSync(shared)).toEqual([]);
  });
});
