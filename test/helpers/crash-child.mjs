// Runs one lifecycle operation on a sysroot in its own process, for the crash-point
// tests. Uses the compiled library (dist/; `npm test` builds it first) so that the
// process can be SIGKILLed by the fault hook with nothing of the test runner around it.
//
//   node crash-child.mjs '{"dir": "/tmp/x/sysroot", "op": "finalize", "killAfter": 7}'
//   node crash-child.mjs '{"dir": "/tmp/x/sysroot", "op": "finalize"}'   (counts)
//
// Counting mode prints {"count": N, "ops": [...], "outcome": ...} on stdout.
// Kill mode dies by SIGKILL right after the n-th mutating filesystem call; it names
// that call on stderr first (so a failing crash point says where it crashed).
import { writeSync } from 'node:fs';
import { Sysroot, countingHook, killAfter } from '../../dist/index.js';

/** The update the `stage` crash points apply (small, but every kind of change). */
export const STAGE_SPEC = {
  label: 'crash-update',
  remove: ['/etc/old.conf'],
  directories: [{ path: '/srv/www', mode: '0750' }],
  files: [
    { path: '/etc/motd', contents: 'updated motd\n' },
    { path: '/usr/lib/libx.so', contents: 'new lib\n', mode: '0755' },
    { path: '/srv/www/index.html', contents: { base64: 'PGgxPmhpPC9oMT4K' } },
  ],
  symlinks: [{ path: '/etc/localtime', target: '/usr/share/zoneinfo/Europe/Paris' }],
  hardlinks: [{ path: '/usr/bin/tool2', target: '/usr/bin/tool' }],
};

/** An update the booted tree cannot take (home/core/test is a regular file): rejected. */
export const REJECTED_SPEC = {
  label: 'mcd-deadlock',
  files: [
    { path: '/etc/motd', contents: 'half applied\n' },
    { path: '/home/core/test/test', contents: 'x\n' },
  ],
};

const ops = {
  open: () => null, // recovery only (Sysroot.open runs it)
  stage: (s) => s.stage(STAGE_SPEC),
  'stage-rejected': async (s) => {
    try {
      await s.stage(REJECTED_SPEC);
      return { rejected: false };
    } catch (err) {
      if (err?.isRejection !== true) throw err;
      return { rejected: true, code: err.code };
    }
  },
  finalize: (s) => s.finalize(),
  boot: (s) => s.boot(),
  rollback: (s) => s.rollback(),
  markBad: (s) => s.markBad('health check failed (crash test)'),
  prune: (s) => s.prune({ keep: 1 }),
};

async function main() {
  const args = JSON.parse(process.argv[2] ?? '{}');
  const run = ops[args.op];
  if (typeof args.dir !== 'string' || run === undefined) {
    throw new Error(`usage: crash-child.mjs '{"dir": DIR, "op": ${Object.keys(ops).join('|')}, "killAfter"?: n}'`);
  }
  const counting = args.killAfter === undefined;
  const faults = counting
    ? countingHook()
    : killAfter(args.killAfter, (op, path) => writeSync(2, `crash point ${args.killAfter}: after ${op} ${path}\n`));
  const sysroot = await Sysroot.open(args.dir, { faults });
  const outcome = await run(sysroot);
  if (counting) {
    process.stdout.write(JSON.stringify({ count: faults.count, ops: faults.ops, outcome }) + '\n');
  } else {
    process.stderr.write(`completed after ${faults.count} mutations without reaching crash point ${args.killAfter}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`crash-child failed: ${err?.stack ?? err}\n`);
  process.exit(1);
});
