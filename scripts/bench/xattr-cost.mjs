/**
 * What keeping extended attributes costs per file: `node scripts/bench/xattr-cost.mjs`
 * (after `npm run build`). Builds a tree of BENCH_FILES files (100,000 by default, 100
 * per directory), then times, each the median of BENCH_REPS runs:
 *   - lstat of every entry (the walk's own cost, for scale),
 *   - lstat + listxattr of every entry (what reading attributes adds),
 *   - copyTree of the whole tree as a stage does it (usr/ hardlinked, with the source
 *     manifest) and as init does (everything copied), with and without a user.* attribute
 *     on every file.
 */
import { performance } from 'node:perf_hooks';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as napi from '@napi-rs/xattr';
import { copyTree } from '../../dist/fs/trees/copy-tree.js';

const files = Number(process.env.BENCH_FILES ?? 100000);
const reps = Number(process.env.BENCH_REPS ?? 3);
const base = fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-xattr-cost-'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = (fn) => {
  const ts = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn(i);
    ts.push(performance.now() - t0);
  }
  return median(ts);
};

function makeTree(root, withXattrs) {
  for (let d = 0; d * 100 < files; d++) {
    const dir = path.join(root, d % 10 === 0 ? 'etc' : 'usr', `d${d}`);
    fs.mkdirSync(dir, { recursive: true });
    for (let f = 0; f < 100 && d * 100 + f < files; f++) {
      const p = path.join(dir, `f${f}`);
      fs.writeFileSync(p, `${d}/${f}\n`);
      if (withXattrs) napi.setAttributeSync(p, 'user.bench', Buffer.from('x'));
    }
  }
}

function entries(root) {
  const out = [];
  const rec = (dir) => {
    for (const n of fs.readdirSync(dir).sort()) {
      const p = dir + '/' + n;
      out.push(p);
      if (fs.lstatSync(p).isDirectory()) rec(p);
    }
  };
  rec(root);
  return out;
}

try {
  const rows = [];
  for (const withXattrs of [false, true]) {
    const src = path.join(base, withXattrs ? 'src-x' : 'src');
    makeTree(src, withXattrs);
    const all = entries(src);
    const lstat = time(() => { for (const p of all) fs.lstatSync(p); });
    const list = time(() => { for (const p of all) { fs.lstatSync(p); napi.listAttributesSync(p); } });
    // init: everything copied; then a stage from it: usr/ hardlinked, lines reused.
    let n = 0;
    const init = time(() => {
      const dst = path.join(base, `init-${withXattrs}-${n++}`);
      fs.mkdirSync(dst);
      copyTree({ src, dst, policy: { hardlinkPrefixes: [], mode: 'reflink' }, manifestOut: dst + '.m' });
    });
    const gen1 = path.join(base, `init-${withXattrs}-0`);
    const stage = time((i) => {
      const dst = path.join(base, `stage-${withXattrs}-${i}`);
      fs.mkdirSync(dst);
      copyTree({ src: gen1, dst, policy: { hardlinkPrefixes: ['usr'], mode: 'reflink' }, srcManifest: gen1 + '.m', manifestOut: dst + '.m' });
    });
    rows.push({ withXattrs, entries: all.length, lstat, list, init, stage });
    for (let i = 0; i < reps; i++) fs.rmSync(path.join(base, `stage-${withXattrs}-${i}`), { recursive: true, force: true });
    for (let i = 0; i < n; i++) fs.rmSync(path.join(base, `init-${withXattrs}-${i}`), { recursive: true, force: true });
  }
  console.log(`xattr cost, ${files} files, median of ${reps}, ${os.cpus().length} CPUs, node ${process.version}`);
  for (const r of rows) {
    const per = ((r.list - r.lstat) * 1000) / r.entries;
    console.log(`${r.withXattrs ? 'user.* on every file' : 'no attributes       '}: ${r.entries} entries; lstat ${r.lstat.toFixed(0)} ms, lstat+listxattr ${r.list.toFixed(0)} ms (listxattr ${per.toFixed(2)} us/entry); copyTree init ${r.init.toFixed(0)} ms, stage (usr hardlinked) ${r.stage.toFixed(0)} ms`);
  }
} finally {
  fs.rmSync(base, { recursive: true, force: true });
}
