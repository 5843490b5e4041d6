import { snapshotManifest } from './dist/fs/snapshot-manifest.js';
import { noFaults } from './dist/fs/faults.js';
import { performance } from 'node:perf_hooks';
const [tree, base] = process.argv.slice(2);
const h = { faults: noFaults, checkAbort() {}, skip() {} };
let best = 1e9;
for (let i = 0; i < 8; i++) { const t = performance.now(); const r = snapshotManifest({ tree, base, out: '/var/tmp/btr/mnt/n.out', trust: ['usr'], events: [] }, h); best = Math.min(best, performance.now() - t); if (i === 0) console.log(r.entries, r.walked, r.hashed); }
console.log('best', best.toFixed(1));
