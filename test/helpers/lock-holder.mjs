// Holds a sysroot's writer lock from another process, for the lock tests (compiled dist/).
//   node lock-holder.mjs SYSROOT HOLD_MS|stdin
// Prints "locked <pid>" once it holds the lock, releases it after HOLD_MS (or, with
// `stdin`, when a line arrives on its stdin), prints "released" and exits.
import { acquireLock } from '../../dist/fs/lock/writer-lock.js';

const [dir, holdMs] = process.argv.slice(2);
const lock = await acquireLock(dir, { operation: 'test-holder' });
process.stdout.write(`locked ${process.pid}\n`);
const done = () => {
  lock.release();
  process.stdout.write('released\n', () => process.exit(0));
};
if (holdMs === 'stdin') process.stdin.once('data', done);
else setTimeout(done, Number(holdMs));
