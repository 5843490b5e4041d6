// Runs lifecycle operations on a sysroot in their own process, for the crash-point, kill
// and concurrency tests. Uses the compiled library (dist/; `npm test` builds it first) so
// that the process can be SIGKILLed with nothing of the test runner around it.
//
// One operation, killed by the fault hook (crash points):
//   node crash-child.mjs '{"dir": "/tmp/x/sysroot", "op": "finalize", "killAfter": 7}'
//   node crash-child.mjs '{"dir": "/tmp/x/sysroot", "op": "finalize"}'   (counts)
// "aheadMs": the process's clock runs that far ahead (the boot-entry record: every stamp on
// disk is then old enough for a sync that writes nothing to record it).
// Counting mode prints {"count": N, "ops": [...], "outcome": ...} on stdout.
// Kill mode dies by SIGKILL right after the n-th mutating filesystem call; it names
// that call on stderr first (so a failing crash point says where it crashed).
//
// A sequence (kill and concurrency tests; killed from outside at a random moment):
//   node crash-child.mjs --sequence
// loads the library, prints "ready", then reads one JSON line {"dir", "ops": [...],
// "pauseMs"?, "waitSeconds"?} from stdin, opens the sysroot (recovery: op "open"; writers
// wait up to waitSeconds for the lock) and runs the ops in order, pausing a random time
// up to pauseMs before each. Around each
// it writes "begin OP" and "end OP MS RESULT" (RESULT: ok, or the error's code for the
// refusals the lifecycle allows; MS since the start) straight to fd 1, so that the last
// line says what the process was doing when it was killed. Ends with "done"; any other
// error exits 1.
import { appendFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Sysroot } from '../../dist/index.js';
import { countingHook, killAfter } from '../../dist/testing/index.js';

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
  // The OCI layout the crash-point suite writes beside the sysroot's directory (an update of the booted image, the same bottom layer).
  'stage-image': (s) => s.stage(join(dirname(s.path), 'image-update')),
  // The update spec file the crash-point suite writes beside the sysroot's directory (a file source: its copy starts before the plan).
  'stage-file': (s) => s.stage(join(dirname(s.path), 'update.json')),
  finalize: (s) => s.finalize(),
  // The actions run through the systemctl stand-in, logging beside the sysroot (recovery's undo runs it again).
  'apply-live': (s) => s.applyLive({ services: { command: ['sh', fileURLToPath(new URL('./fake-systemctl.sh', import.meta.url)), `${s.path}.systemctl.log`] } }),
  boot: (s) => s.boot(),
  rollback: (s) => s.rollback(),
  markBad: (s) => s.markBad('health check failed (crash test)'),
  prune: (s) => s.prune({ keep: 1 }),
  // For sequences: each stage differs (so every deployment differs) and applies over its own result.
  'stage-next': (s) => s.stage(nextSpec()),
  markGood: (s) => s.markGood(),
  // The running system at work: local edits in the booted etc/ (what finalize merges) and a /var write.
  'edit-local': (s) => {
    const st = s.status();
    const live = s.treePath(st.booted);
    // Which deployments the running system edited (their drift in etc/ is expected), beside the sysroot.
    appendFileSync(`${s.path}.local-edits`, `${st.booted}\n`);
    edits += 1;
    const token = `${process.pid}-${edits}`;
    writeFileSync(`${live}/etc/local-${token}.conf`, `local ${token}\n`);
    writeFileSync(`${live}/etc/conf.d/${edits % 20}.conf`, `edited ${token}\n`);
    rmSync(`${live}/etc/conf.d/${(edits + 10) % 20}.conf`, { force: true });
    if (st.shared.var) writeFileSync(`${st.shared.var}/local-${token}`, `${token}\n`);
    return token;
  },
  'rollback-discard': (s) => s.rollback({ discardStaged: true }),
  discard: (s) => s.discardStaged(),
  'prune-2': (s) => s.prune({ keep: 2 }),
  // A reader: status must parse, name a current deployment it lists, with a tree there.
  status: (s) => {
    const st = s.status();
    const cur = st.deployments.find((d) => d.id === st.current);
    if (cur === undefined || !cur.current) throw new Error(`torn status: current ${st.current} not listed as current: ${JSON.stringify(st)}`);
    if (st.staged !== null && !st.deployments.some((d) => d.id === st.staged && d.staged)) throw new Error(`torn status: staged ${st.staged} not listed: ${JSON.stringify(st)}`);
    return st.current;
  },
};

let stages = 0;
let edits = 0;
/** A small update of every kind of change that applies again over its own result. */
function nextSpec() {
  stages += 1;
  const token = `${process.pid}-${stages}-${Date.now()}`;
  return {
    label: `seq-${token}`,
    remove: [{ path: '/etc/old.conf', missingOk: true }, { path: '/var/spool/job', recursive: true, missingOk: true }],
    directories: [{ path: '/srv/www', mode: '0750' }, { path: '/var/spool/job' }],
    files: [
      { path: '/etc/motd', contents: `motd ${token}\n` },
      { path: '/usr/lib/libx.so', contents: `lib ${token}\n`, mode: '0755' },
      { path: '/srv/www/index.html', contents: `<h1>${token}</h1>\n` },
      ...[1, 2, 3].map((i) => ({ path: `/var/spool/job/part${i}`, contents: `${token} part ${i}\n`.repeat(64) })),
    ],
    symlinks: [{ path: '/etc/localtime', target: `/usr/share/zoneinfo/${stages % 2 ? 'Europe/Paris' : 'UTC'}`, overwrite: true }],
  };
}

/** Refusals the lifecycle allows in a random sequence (nothing to roll back to, lock held, ...). */
const ALLOWED_REFUSALS = new Set(['BUSY', 'NOTHING_STAGED', 'NO_ROLLBACK', 'INVALID_TRANSITION']);

async function sequence() {
  const line = (text) => writeSync(1, `${text}\n`);
  line('ready');
  const rl = createInterface({ input: process.stdin });
  const first = await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
  process.stdin.destroy();
  const t0 = performance.now();
  const { dir, ops: list, pauseMs = 0, waitSeconds = 0 } = JSON.parse(first);
  const bad = list.filter((op) => ops[op] === undefined);
  if (bad.length) throw new Error(`unknown ops: ${bad.join(', ')}`);
  const ms = () => (performance.now() - t0).toFixed(1);
  line('begin open');
  const sysroot = await Sysroot.open(dir, { waitSeconds });
  line(`end open ${ms()} ok`);
  for (const op of list) {
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, Math.random() * pauseMs));
    line(`begin ${op}`);
    try {
      await ops[op](sysroot);
      line(`end ${op} ${ms()} ok`);
    } catch (err) {
      if (!ALLOWED_REFUSALS.has(err?.code)) throw err;
      line(`end ${op} ${ms()} ${err.code}`);
    }
  }
  line('done');
}

async function main() {
  if (process.argv[2] === '--sequence') return sequence();
  const args = JSON.parse(process.argv[2] ?? '{}');
  const run = ops[args.op];
  if (typeof args.dir !== 'string' || run === undefined) {
    throw new Error(`usage: crash-child.mjs '{"dir": DIR, "op": ${Object.keys(ops).join('|')}, "killAfter"?: n, "aheadMs"?: ms}'`);
  }
  const counting = args.killAfter === undefined;
  const faults = counting
    ? countingHook()
    : killAfter(args.killAfter, (op, path) => writeSync(2, `crash point ${args.killAfter}: after ${op} ${path}\n`));
  const clock = args.aheadMs === undefined ? {} : { now: () => new Date(Date.now() + args.aheadMs) };
  const sysroot = await Sysroot.open(args.dir, { faults, ...clock });
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
