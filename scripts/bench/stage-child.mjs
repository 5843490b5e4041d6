/**
 * Stages one update in its own process, so that its peak memory can be read:
 *   node stage-child.mjs SYSROOT SPEC POLICY_JSON
 * prints {"ms", "id", "maxRssKb", "vmHwmKb"} (stage time measured around stage() alone).
 */
import { performance } from 'node:perf_hooks';
import * as fs from 'node:fs';
import { Sysroot } from '../../dist/index.js';

const [dir, spec, policy] = process.argv.slice(2);
const sysroot = await Sysroot.open(dir);
const t0 = performance.now();
const r = await sysroot.stage(spec, { copyPolicy: JSON.parse(policy) });
const ms = performance.now() - t0;
const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
process.stdout.write(JSON.stringify({ ms, id: r.id, maxRssKb: process.resourceUsage().maxRSS, vmHwmKb: hwm ? Number(hwm[1]) : null }) + '\n');
