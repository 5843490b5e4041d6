// Child process for tar/layer-source-memory.slow.test.ts and oci/image-source-memory.slow.test.ts: stages one layer into a fresh sysroot
// and prints what it measured as one JSON line. Runs the built library (dist/).
//   node --max-old-space-size=64 stage-big-layer.mjs SYSROOT LAYER
import { Sysroot } from '../../dist/index.js';

const [sysrootDir, layer] = process.argv.slice(2);
const sysroot = await Sysroot.init(sysrootDir);
let peakHeap = 0;
let peakRss = 0;
const sample = () => {
  const m = process.memoryUsage();
  peakHeap = Math.max(peakHeap, m.heapUsed);
  peakRss = Math.max(peakRss, m.rss);
};
const timer = setInterval(sample, 20);
const t0 = process.hrtime.bigint();
const r = await sysroot.stage(layer);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
clearInterval(timer);
sample();
const MiB = 1024 * 1024;
process.stdout.write(JSON.stringify({
  id: r.id,
  path: r.path,
  bytes: r.bytes,
  seconds: Math.round(seconds * 10) / 10,
  maxRssMiB: Math.round((process.resourceUsage().maxRSS * 1024) / MiB),
  sampledPeakRssMiB: Math.round(peakRss / MiB),
  sampledPeakHeapMiB: Math.round(peakHeap / MiB),
}) + '\n');
