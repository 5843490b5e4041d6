/**
 * One stage or one finalize in its own process, with the largest event-loop delay
 * the caller saw during it:
 *   node merge-eld-child.mjs DIST_DIR SYSROOT stage SPEC | finalize
 * prints {"op", "ms", "eldMaxMs"}. DIST_DIR is a build of the library (its dist/), so
 * that two builds can be compared in interleaved runs.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

const [dist, dir, op, spec] = process.argv.slice(2);
const { Sysroot } = await import(pathToFileURL(path.resolve(dist, 'index.js')).href);
const sysroot = await Sysroot.open(dir);
const eld = monitorEventLoopDelay({ resolution: 5 });
eld.enable();
// The histogram records a delay from its second tick on: an operation that blocked the
// loop from its very start would go unseen without a few ticks first.
await new Promise((resolve) => setTimeout(resolve, 20));
const t0 = performance.now();
if (op === 'stage') await sysroot.stage(spec);
else if (op === 'finalize') await sysroot.finalize();
else throw new Error(`unknown operation ${op}`);
const ms = performance.now() - t0;
await new Promise((resolve) => setTimeout(resolve, 20));
eld.disable();
process.stdout.write(JSON.stringify({ op, ms: Math.round(ms), eldMaxMs: Math.round(eld.max / 1e5) / 10 }) + '\n');
