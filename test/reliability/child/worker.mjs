// A process running random lifecycle operations against one sysroot, for the
// concurrency test: node worker.mjs SYSROOT SPEC SEED OPS
// prints one JSON line per operation: {op, ok, code?, message?}. Some writers wait
// for the lock (waitSeconds), the others must be refused with BUSY.
import { Sysroot } from '../../../dist/index.js';

const [dir, spec, seedArg, countArg] = process.argv.slice(2);
let seed = Number(seedArg);
const rnd = () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const OPS = ['stage', 'stage', 'finalize', 'boot', 'mark-good', 'rollback', 'discard', 'prune', 'status', 'status', 'verify'];
for (let i = 0; i < Number(countArg); i++) {
  const op = OPS[Math.floor(rnd() * OPS.length)];
  try {
    // Some writers wait for the lock instead of failing at once.
    const s = await Sysroot.open(dir, { waitSeconds: rnd() < 0.3 ? 10 : 0 });
    switch (op) {
      case 'stage': await s.stage(spec, { label: `w${seedArg}-${i}` }); break;
      case 'finalize': await s.finalize(); break;
      case 'boot': await s.boot(); break;
      case 'mark-good': await s.markGood(); break;
      case 'rollback': await s.rollback({ discardStaged: rnd() < 0.5 }); break;
      case 'discard': await s.discardStaged(); break;
      case 'prune': await s.prune({ keep: 2 }); break;
      case 'status': {
        // A reader never blocks and never sees a torn state.
        const st = s.status();
        if (!st.deployments.some((d) => d.id === st.current)) throw new Error(`status shows current ${st.current} without its deployment`);
        break;
      }
      case 'verify': s.verify(); break;
    }
    process.stdout.write(JSON.stringify({ op, ok: true }) + '\n');
  } catch (err) {
    process.stdout.write(JSON.stringify({ op, ok: false, code: err?.code ?? null, message: String(err?.message ?? err) }) + '\n');
  }
  await new Promise((r) => setTimeout(r, rnd() * 20));
}
