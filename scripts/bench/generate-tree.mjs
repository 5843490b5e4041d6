/**
 * Generates, from a fixed seed, a root tree in a realistic shape and an update to it:
 *
 *   usr/bin            a flat directory of executables
 *   usr/lib/PKG/...    deep package trees of small files, a few large ones, .so symlinks
 *   usr/share/PKG/...  deep data trees of small files; usr/share/doc/PKG, usr/include/PKG
 *   usr/lib/modules/V  a kernel and an initramfs (ostree needs them to deploy)
 *   etc/PKG/...        small config files; etc/os-release
 *   bin, lib, sbin     usrmerge symlinks into usr/
 *
 * The update modifies 100 files, adds 50 and removes 50, as a native update spec. The
 * new tree (base + update) is built beside it for the tools that need a full tree
 * (rsync --link-dest, ostree commit), as hardlinks of the base plus the changed files.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { prng, randomPool } from './prng.mjs';

export const KERNEL_VERSION = '6.1.0-bench';
const POOL = 16 << 20;

/** Writes a file whose content is unique (its path) plus a slice of the random pool. */
function writeContent(file, size, pool, rng, mode) {
  const head = Buffer.from(`${file}\n`);
  const bodyLen = Math.max(0, size - head.length);
  const chunks = [head];
  let left = bodyLen;
  while (left > 0) {
    const n = Math.min(left, POOL - 1);
    const off = rng.int(0, POOL - n);
    chunks.push(pool.subarray(off, off + n));
    left -= n;
  }
  const data = chunks.length === 2 ? Buffer.concat(chunks, head.length + bodyLen) : Buffer.concat(chunks);
  fs.writeFileSync(file, data, { mode });
  if (mode !== 0o644) fs.chmodSync(file, mode);
  return data.length;
}

/** Builds the list of entries (paths, sizes, modes) first, then writes them in sorted order. */
function planTree(files, rng) {
  const entries = []; // { rel, size, mode } for files; { rel, link } for symlinks
  const pkgCount = Math.max(10, Math.round(files / 50));
  const pkgs = Array.from({ length: pkgCount }, (_, i) => `pkg${String(i).padStart(5, '0')}`);
  const used = new Set();
  const add = (e) => {
    if (used.has(e.rel)) return false;
    used.add(e.rel);
    entries.push(e);
    return true;
  };
  // Each package owns a few directories per root, up to 5 levels deep (about 8 files a directory).
  const pkgDirs = new Map();
  const deepDir = (root, pkg) => {
    const key = `${root}/${pkg}`;
    let list = pkgDirs.get(key);
    if (list === undefined) {
      list = [key];
      for (let i = rng.int(0, 3); i > 0; i--) {
        const parts = [key];
        for (let d = rng.int(1, 4); d > 0; d--) parts.push(rng.pick(['data', 'lib', 'po', 'icons', 'x86_64', 'plugins', 'site', 'tests']));
        list.push(parts.join('/'));
      }
      pkgDirs.set(key, list);
    }
    return rng.pick(list);
  };
  const smallSize = () => rng.logSize(100, 8 * 1024);

  add({ rel: 'etc/os-release', size: 0, text: 'NAME="Bench OS"\nID=bench\nVERSION_ID=1\nPRETTY_NAME="Bench OS 1"\n', mode: 0o644 });
  add({ rel: `usr/lib/modules/${KERNEL_VERSION}/vmlinuz`, size: 2 << 20, mode: 0o644 });
  add({ rel: `usr/lib/modules/${KERNEL_VERSION}/initramfs.img`, size: 4 << 20, mode: 0o644 });
  let n = 3;
  const large = Math.max(2, Math.round(files / 1000));
  while (n < files) {
    const pkg = rng.pick(pkgs);
    const r = rng.next();
    const idx = n;
    let e;
    if (n - 3 < large) {
      e = { rel: `${deepDir('usr/lib', pkg)}/blob${idx}.bin`, size: rng.logSize(256 * 1024, 2 << 20), mode: 0o644 };
    } else if (r < 0.03) {
      e = { rel: `etc/${pkg}/${rng.next() < 0.5 ? '' : `conf.d/`}c${idx}.conf`, size: rng.logSize(64, 4096), mode: 0o644 };
    } else if (r < 0.05) {
      e = { rel: `usr/bin/${pkg}-tool${idx}`, size: rng.logSize(4 * 1024, 64 * 1024), mode: 0o755 };
    } else if (r < 0.45) {
      if (rng.next() < 0.03) {
        e = { rel: `usr/lib/${pkg}/lib${idx}.so`, link: `lib${idx}.so.1` };
        add(e);
        e = { rel: `usr/lib/${pkg}/lib${idx}.so.1`, size: rng.logSize(16 * 1024, 128 * 1024), mode: 0o755 };
      } else {
        e = { rel: `${deepDir('usr/lib', pkg)}/m${idx}.py`, size: smallSize(), mode: 0o644 };
      }
    } else if (r < 0.9) {
      e = { rel: `${deepDir('usr/share', pkg)}/f${idx}.dat`, size: smallSize(), mode: 0o644 };
    } else if (r < 0.95) {
      e = { rel: `usr/share/doc/${pkg}/README${idx}`, size: smallSize(), mode: 0o644 };
    } else {
      e = { rel: `usr/include/${pkg}/h${idx}.h`, size: smallSize(), mode: 0o644 };
    }
    if (add(e)) n += 1;
  }
  add({ rel: 'bin', link: 'usr/bin' });
  add({ rel: 'sbin', link: 'usr/bin' });
  add({ rel: 'lib', link: 'usr/lib' });
  add({ rel: 'etc/localtime', link: '../usr/share/zoneinfo/UTC' });
  entries.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return entries;
}

/**
 * Generates `<dir>/base`, `<dir>/new`, `<dir>/update.json` and the ostree-shaped trees
 * `<dir>/base-ostree`, `<dir>/new-ostree` (etc/ moved to usr/etc, as ostree requires;
 * not with `o.ostree` false).
 */
export function generate(dir, files, seed, o = {}) {
  const rng = prng(seed);
  const pool = randomPool(rng, POOL);
  const base = path.join(dir, 'base');
  fs.mkdirSync(base, { recursive: true });
  const entries = planTree(files, rng);
  const made = new Set();
  const mkdirp = (d) => {
    if (made.has(d)) return;
    fs.mkdirSync(d, { recursive: true });
    made.add(d);
  };
  let bytes = 0;
  let regular = 0;
  let symlinks = 0;
  for (const e of entries) {
    const host = path.join(base, e.rel);
    mkdirp(path.dirname(host));
    if (e.link !== undefined) {
      fs.symlinkSync(e.link, host);
      symlinks += 1;
    } else if (e.text !== undefined) {
      fs.writeFileSync(host, e.text);
      bytes += e.text.length;
      regular += 1;
    } else {
      bytes += writeContent(host, e.size, pool, rng, e.mode);
      regular += 1;
    }
  }

  // The update: 100 modified, 50 added, 50 removed (small files; a few in etc/).
  const candidates = entries.filter((e) => e.link === undefined && e.text === undefined && e.size <= 64 * 1024);
  const chosen = rng.sample(candidates, 150);
  const modified = chosen.slice(0, 100);
  const removed = chosen.slice(100, 150);
  const dirs = [...new Set(entries.filter((e) => e.link === undefined).map((e) => path.posix.dirname(e.rel)))].sort();
  const added = [];
  for (let i = 0; i < 50; i++) {
    const d = i < 40 ? rng.pick(dirs) : 'usr/lib/pkg-new/data';
    added.push({ rel: `${d}/added${i}.dat`, size: rng.logSize(100, 8 * 1024), mode: 0o644 });
  }
  const content = (e, tag) => {
    const head = Buffer.from(`${tag} ${e.rel}\n`);
    const n = Math.max(0, e.size - head.length + rng.int(-50, 50));
    const off = rng.int(0, POOL - n - 1);
    return Buffer.concat([head, pool.subarray(off, off + n)]);
  };
  const changes = [
    ...modified.map((e) => ({ rel: e.rel, data: content(e, 'updated'), mode: e.mode })),
    ...added.map((e) => ({ rel: e.rel, data: content(e, 'added'), mode: e.mode })),
  ];
  const spec = {
    version: 1,
    label: 'bench-update',
    files: changes.map((c) => ({ path: `/${c.rel}`, contents: { base64: c.data.toString('base64') }, mode: `0${c.mode.toString(8)}` })),
    remove: removed.map((e) => `/${e.rel}`),
  };
  const specPath = path.join(dir, 'update.json');
  fs.writeFileSync(specPath, JSON.stringify(spec));

  // The new tree: hardlinks of the base, with the update applied (unlink, then write: the base stays intact).
  const newTree = path.join(dir, 'new');
  cpal(base, newTree);
  for (const e of removed) fs.unlinkSync(path.join(newTree, e.rel));
  for (const c of changes) {
    const host = path.join(newTree, c.rel);
    fs.mkdirSync(path.dirname(host), { recursive: true });
    fs.rmSync(host, { force: true });
    fs.writeFileSync(host, c.data, { mode: c.mode });
    fs.chmodSync(host, c.mode);
  }

  // ostree keeps the default /etc in /usr/etc (rpm-ostree moves it there at compose time).
  const ostreeTrees = {};
  for (const [name, src] of o.ostree === false ? [] : [['base-ostree', base], ['new-ostree', newTree]]) {
    const t = path.join(dir, name);
    cpal(src, t);
    fs.renameSync(path.join(t, 'etc'), path.join(t, 'usr/etc'));
    ostreeTrees[name] = t;
  }
  return {
    base,
    newTree,
    specPath,
    ostreeBase: ostreeTrees['base-ostree'],
    ostreeNew: ostreeTrees['new-ostree'],
    stats: { files: regular, symlinks, dirs: made.size, bytes, modified: modified.length, added: added.length, removed: removed.length },
  };
}

/** A hardlink copy of a tree (same as cp -al, in process). */
function cpal(src, dst) {
  fs.mkdirSync(dst, { recursive: true });
  for (const name of fs.readdirSync(src)) {
    const s = path.join(src, name);
    const d = path.join(dst, name);
    const st = fs.lstatSync(s);
    if (st.isDirectory()) {
      cpal(s, d);
      fs.chmodSync(d, st.mode & 0o7777);
    } else if (st.isSymbolicLink()) {
      fs.symlinkSync(fs.readlinkSync(s), d);
    } else {
      fs.linkSync(s, d);
    }
  }
}
