/**
 * Stages one update in its own process, so that its peak memory can be read:
 *   node stage-child.mjs SYSROOT SPEC POLICY_JSON
 * prints {"ms", "id", "maxRssKb", "vmHwmKb", "eldMaxMs", "busyMaxMs", "cpuMaxMs", "steps"} (stage
 * time measured around stage() alone; `steps` the time from each step's first progress
 * event to the next step's, so the report can say where a stage spends its time). eldMaxMs is the largest event-loop delay that
 * perf_hooks.monitorEventLoopDelay saw during the stage (what an agent's health probe
 * would wait); busyMaxMs the longest stretch, between two 5 ms timer ticks, that the
 * loop spent running code rather than waiting (eventLoopUtilization); cpuMaxMs the most
 * CPU time the main thread itself used between two ticks (its schedstat): on a loaded
 * machine a delay can be the scheduler's (the thread waits for a core), and this is the
 * part that is the library's own work.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import * as fs from 'node:fs';
import { Sysroot } from '../../dist/index.js';

const [dir, spec, policy] = process.argv.slice(2);
const sysroot = await Sysroot.open(dir);
const eld = monitorEventLoopDelay({ resolution: 5 });
let busyMax = 0;
let cpuMax = 0;
let elu = performance.eventLoopUtilization();
const schedstat = `/proc/self/task/${process.pid}/schedstat`;
const cpuNs = () => {
  try {
    return Number(fs.readFileSync(schedstat, 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
};
let cpu = cpuNs();
const tick = setInterval(() => {
  const d = performance.eventLoopUtilization(elu);
  elu = performance.eventLoopUtilization();
  busyMax = Math.max(busyMax, d.active);
  const c = cpuNs();
  cpuMax = Math.max(cpuMax, (c - cpu) / 1e6);
  cpu = c;
}, 5);
eld.enable();
const t0 = performance.now();
const steps = {};
let step = null;
let stepAt = t0;
const onProgress = (p) => {
  if (p.phase === step) return;
  const now = performance.now();
  if (step !== null) steps[step] = (steps[step] ?? 0) + (now - stepAt);
  step = p.phase;
  stepAt = now;
};
const r = await sysroot.stage(spec, { copyPolicy: JSON.parse(policy), onProgress });
const ms = performance.now() - t0;
if (step !== null) steps[step] = (steps[step] ?? 0) + (t0 + ms - stepAt);
// One more turn of the loop, so that a delay at the very end is recorded too.
await new Promise((resolve) => setTimeout(resolve, 20));
eld.disable();
clearInterval(tick);
const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
process.stdout.write(
  JSON.stringify({ ms, id: r.id, maxRssKb: process.resourceUsage().maxRSS, vmHwmKb: hwm ? Number(hwm[1]) : null, eldMaxMs: eld.max / 1e6, busyMaxMs: busyMax, cpuMaxMs: Number.isNaN(cpuMax) ? null : cpuMax, steps }) + '\n',
);
