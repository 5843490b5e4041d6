import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { expect } from 'vitest';
import { readXattrs } from '../../src/fs/core/xattr.js';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { RootFs } from '../../src/fs/trees/root-fs.js';
import { imageSource } from '../../src/sources/oci/image-source.js';
import { applyChanges } from '../../src/apply-changes.js';

/** One entry of a generated layer: names and link targets are bytes (a string is UTF-8). */
export type GenEntry =
  | { type: 'file'; path: Buffer | string; content: Buffer | string; mode?: number; uid?: number; gid?: number; mtime?: number; xattrs?: [string, Buffer][] }
  | { type: 'dir'; path: Buffer | string; mode?: number; uid?: number; gid?: number; mtime?: number; xattrs?: [string, Buffer][] }
  | { type: 'symlink'; path: Buffer | string; target: Buffer | string; uid?: number; gid?: number; xattrs?: [string, Buffer][] }
  | { type: 'hardlink'; path: Buffer | string; target: Buffer | string };

const bytes = (b: Buffer | string): Buffer => (typeof b === 'string' ? Buffer.from(b) : b);

/** A PAX record "LEN key=value\n" (LEN counts itself). */
function paxRecord(key: string, value: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), value, Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len = String(len).length + body.length;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, type: string, size: number, mode: number, uid: number, gid: number, mtime: number, linkname = ''): Buffer {
  const h = Buffer.alloc(512);
  h.write(name.slice(0, 99), 0, 'latin1');
  h.write(octal(mode, 8), 100);
  h.write(octal(uid, 8), 108);
  h.write(octal(gid, 8), 116);
  h.write(octal(size, 12), 124);
  h.write(octal(Math.floor(mtime), 12), 136);
  h.write('        ', 148);
  h.write(type, 156);
  h.write(linkname.slice(0, 99), 157, 'latin1');
  h.write('ustar\0', 257);
  h.write('00', 263);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  return h;
}

const pad = (n: number): Buffer => Buffer.alloc((512 - (n % 512)) % 512);

/** A POSIX tar of the entries, each with a PAX header for its path, link target, mtime and xattrs (names as bytes). */
export function makeTar(entries: GenEntry[]): Buffer {
  const out: Buffer[] = [];
  for (const e of entries) {
    const recs = [paxRecord('path', bytes(e.path))];
    if (e.type === 'symlink' || e.type === 'hardlink') recs.push(paxRecord('linkpath', bytes(e.target)));
    if ('mtime' in e && e.mtime !== undefined) recs.push(paxRecord('mtime', Buffer.from(String(e.mtime))));
    if ('xattrs' in e) for (const [n, v] of e.xattrs ?? []) recs.push(paxRecord(`SCHILY.xattr.${n}`, v));
    const pax = Buffer.concat(recs);
    out.push(header('PaxHeader', 'x', pax.length, 0o644, 0, 0, 0), pax, pad(pax.length));
    const mode = 'mode' in e && e.mode !== undefined ? e.mode : e.type === 'dir' ? 0o755 : 0o644;
    const uid = 'uid' in e ? e.uid ?? 0 : 0;
    const gid = 'gid' in e ? e.gid ?? 0 : 0;
    const mtime = 'mtime' in e && e.mtime !== undefined ? e.mtime : 1_700_000_000;
    const content = e.type === 'file' ? bytes(e.content) : Buffer.alloc(0);
    const type = { file: '0', dir: '5', symlink: '2', hardlink: '1' }[e.type];
    out.push(header('placeholder', type, content.length, mode, uid, gid, mtime, e.type === 'symlink' || e.type === 'hardlink' ? 'placeholder' : ''), content, pad(content.length));
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

export const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

export interface LayoutLayer {
  tar: Buffer;
  gzip?: boolean;
}

export interface WrittenLayer {
  /** The blob's digest (compressed when gzip), its diff_id, its file. */
  digest: string;
  diffId: string;
  file: string;
  size: number;
}

/** An OCI image layout at `dir` with these layers (bottom first); returns each layer's blob. */
export function writeLayout(dir: string, layers: LayoutLayer[]): WrittenLayer[] {
  fs.mkdirSync(path.join(dir, 'blobs', 'sha256'), { recursive: true });
  const put = (data: Buffer): { digest: string; size: number; file: string } => {
    const hex = sha256(data);
    const file = path.join(dir, 'blobs', 'sha256', hex);
    fs.writeFileSync(file, data);
    return { digest: `sha256:${hex}`, size: data.length, file };
  };
  const written = layers.map((l) => {
    const blob = l.gzip ? gzipSync(l.tar) : l.tar;
    return { ...put(blob), diffId: `sha256:${sha256(l.tar)}`, mediaType: l.gzip ? 'application/vnd.oci.image.layer.v1.tar+gzip' : 'application/vnd.oci.image.layer.v1.tar' };
  });
  const config = put(Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: written.map((w) => w.diffId) }, config: {} })));
  const manifest = put(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: config.digest, size: config.size },
        layers: written.map((w) => ({ mediaType: w.mediaType, digest: w.digest, size: w.size })),
      }),
    ),
  );
  fs.writeFileSync(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  fs.writeFileSync(path.join(dir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: manifest.digest, size: manifest.size }] }));
  return written.map((w) => ({ digest: w.digest, diffId: w.diffId, file: w.file, size: w.size }));
}

/** The reference: the image applied fresh, as a stage applies it today (imageSource's plan through applyChanges). */
export async function freshApply(layout: string, tree: string): Promise<void> {
  fs.mkdirSync(tree, { recursive: true });
  // An image plans nothing from its base tree (it replaces it whole): the new tree stands in.
  const cs = await imageSource(layout, { platform: { os: 'linux', architecture: 'amd64' } }).plan(new ReadOnlyTree(tree));
  await applyChanges(new RootFs(tree, { durability: 'deferred' }), cs);
}

/** A blob for importLayer, read from its file. */
export function blobOf(w: WrittenLayer, o: { withDiffId?: boolean } = {}) {
  return {
    digest: w.digest,
    ...(o.withDiffId === false ? {} : { diffId: w.diffId }),
    size: w.size,
    where: `blob ${w.digest}`,
    async *open() {
      const fd = fs.openSync(w.file, 'r');
      try {
        const buf = Buffer.alloc(64 * 1024);
        for (let n = fs.readSync(fd, buf); n > 0; n = fs.readSync(fd, buf)) yield Buffer.from(buf.subarray(0, n));
      } finally {
        fs.closeSync(fd);
      }
    },
  };
}

/**
 * Every entry of a tree as one line: byte name, type, mode, owner, xattrs (all of them),
 * and for files size, content hash and mtime, for symlinks the target. Directory mtimes
 * are left out (a later layer's entries change them at the time they are made).
 */
export function describeTree(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: Buffer): void => {
    const host = rel.length === 0 ? Buffer.from(root) : Buffer.concat([Buffer.from(root + '/'), rel]);
    const names = (fs.readdirSync(host, { encoding: 'buffer' }) as Buffer[]).sort(Buffer.compare);
    for (const n of names) {
      const r = rel.length === 0 ? n : Buffer.concat([rel, Buffer.from('/'), n]);
      const p = Buffer.concat([Buffer.from(root + '/'), r]);
      const st = fs.lstatSync(p);
      const x = readXattrs(p)
        .map(([k, v]) => `${k}=${v.toString('hex')}`)
        .join(',');
      let line = `${r.toString('hex')} ${(st.mode & 0o170000).toString(8)} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} [${x}]`;
      if (st.isFile()) line += ` ${st.size} ${sha256(fs.readFileSync(p))} ${Math.round(st.mtimeMs)}`;
      if (st.isSymbolicLink()) line += ` -> ${(fs.readlinkSync(p, { encoding: 'buffer' }) as Buffer).toString('hex')}`;
      out.push(line);
      if (st.isDirectory()) walk(r);
    }
  };
  walk(Buffer.alloc(0));
  return out;
}

/** Groups of paths (hex) that are one inode, for the files with more than one name in the tree. */
export function inodeGroups(root: string): string[][] {
  const by = new Map<string, string[]>();
  const walk = (rel: Buffer): void => {
    const host = rel.length === 0 ? Buffer.from(root) : Buffer.concat([Buffer.from(root + '/'), rel]);
    for (const n of fs.readdirSync(host, { encoding: 'buffer' }) as Buffer[]) {
      const r = rel.length === 0 ? n : Buffer.concat([rel, Buffer.from('/'), n]);
      const st = fs.lstatSync(Buffer.concat([Buffer.from(root + '/'), r]));
      if (st.isDirectory()) walk(r);
      else if (st.isFile()) {
        const k = `${st.dev}:${st.ino}`;
        by.set(k, [...(by.get(k) ?? []), r.toString('hex')]);
      }
    }
  };
  walk(Buffer.alloc(0));
  return [...by.values()].filter((g) => g.length > 1).map((g) => g.sort());
}

/** A scratch directory on tmpfs (/dev/shm) when there is one: a syncfs there costs nothing. */
export function scratch(prefix: string, onDisk = false): string {
  const parent = !onDisk && fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  return fs.mkdtempSync(path.join(parent, prefix));
}

/** Names that are one inode in the fresh tree are one inode in the linked tree (which may share more: equal objects). */
export function expectSameLinks(fresh: string, linked: string): void {
  const groups = inodeGroups(linked);
  for (const g of inodeGroups(fresh)) expect(groups.some((l) => g.every((p) => l.includes(p))), g.join(' ')).toBe(true);
}
