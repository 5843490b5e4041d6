// Holds a sysroot's writer lock from another process, for the lock tests (compiled dist/).
//   node lock-holder.mjs SYSROOT HOLD_MS
// Prints "locked <pid>" once it holds the lock, releases it after HOLD_MS and exits.
import { acquireLock } from '../../dist/fs/core/lock.js';

const [dir, holdMs] = process.argv.slice(2);
const lock = await acquireLock(dir, { operation: 'test-holder' });
process.stdout.write(`locked ${process.pid}\n`);
setTimeout(() => {
  lock.release();
  process.exit(0);
}, Number(holdMs));
