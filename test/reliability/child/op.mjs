// One lifecycle operation in its own process, for the kill test. Started ahead of
// time (module loading is most of a Node start), it prints "ready", then takes one
// command line on stdin: OP SYSROOT [SPEC]; prints "go" right before the operation
// starts and "done MS" once it has finished.
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { Sysroot } from '../../../dist/index.js';

process.stdout.write('ready\n');
const rl = createInterface({ input: process.stdin });
const line = await new Promise((resolve) => rl.once('line', resolve));
rl.close();
const [op, dir, spec] = JSON.parse(line);
const sysroot = await Sysroot.open(dir);
process.stdout.write('go\n');
const t0 = performance.now();
switch (op) {
  case 'stage':
    await sysroot.stage(spec);
    break;
  case 'finalize':
    await sysroot.finalize();
    break;
  case 'rollback':
    await sysroot.rollback({ discardStaged: true });
    break;
  case 'prune':
    await sysroot.prune({ keep: 1 });
    break;
  default:
    throw new Error(`unknown operation ${op}`);
}
process.stdout.write(`done ${(performance.now() - t0).toFixed(1)}\n`);
