// npm run test:crash-replay: power cuts at every flush point, proven at the block level
// (the way CrashMonkey and xfstests' generic/482 do it). For each filesystem (ext4, XFS):
// a QEMU guest runs stagedroot's lifecycle on a dm-log-writes device, then the host
// replays the log onto a copy of the base image up to every FLUSH/FUA entry (and a few
// seeded random subsets of the unflushed writes before each) and checks each state
// (replay.check.ts). Prints "FS: N flush points, N states, N violations" per filesystem
// and closes with "crash-replay: N passed, N failed".
//
// STAGEDROOT_REPLAY_BUDGET: how many flush points to check per filesystem (a seeded sample,
// always with the marks' points; default: all). STAGEDROOT_REPLAY_SUBSETS: random subsets
// per flush point (default 2). STAGEDROOT_REPLAY_SEED: the sample's and subsets' seed.
// STAGEDROOT_REPLAY_FS: one filesystem only (ext4, xfs, or esp: systemd-boot's entries on a
// FAT ESP, esp-lifecycle.mjs and esp.check.ts). Needs root, qemu-system-x86, busybox-static,
// cpio, debootstrap, e2fsprogs, xfsprogs, dosfstools, mtools and linux-image-cloud-amd64.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { boot, buildGuest } from './guest.mjs';
import { ESP_STEPS, buildEspDisks, imageDigests } from './esp-lifecycle.mjs';
import { FILESYSTEMS, LOCAL_EDIT_PATHS, STEPS, SYSROOT_DIR, VAR_DIR, buildBase, guestScript } from './lifecycle.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '../..');
const cache = process.env.STAGEDROOT_TEST_CACHE ?? '/var/cache/stagedroot-test';
const out = process.env.STAGEDROOT_REPLAY_OUT ?? fs.mkdtempSync('/var/tmp/stagedroot-replay-');
fs.mkdirSync(out, { recursive: true });
const log = (m) => process.stderr.write(`crash-replay: ${m}\n`);
const only = process.env.STAGEDROOT_REPLAY_FS ?? null;
/** What is logged and replayed: the sysroot's filesystems, then the ESP (last: its sysroot disk follows its log). */
const KINDS = [...Object.keys(FILESYSTEMS), 'esp'];
const LOG_SIZE = 2 * 2 ** 30;

if (process.getuid?.() !== 0) {
  console.error('crash-replay: needs root (debootstrap, loop mounts, mkfs)');
  console.log('crash-replay: 0 passed, 1 failed');
  process.exit(1);
}
if (only !== null && !KINDS.includes(only)) {
  console.error(`crash-replay: STAGEDROOT_REPLAY_FS=${only}: one of ${KINDS.join(', ')}`);
  console.log('crash-replay: 0 passed, 1 failed');
  process.exit(1);
}

const started = Date.now();
log(`output in ${out}`);
let guest;
try {
  guest = buildGuest({ cache, work: out, log });
} catch (err) {
  console.error(`crash-replay: cannot build the guest: ${err.stderr?.toString() || err.message}`);
  console.log('crash-replay: 0 passed, 1 failed');
  process.exit(1);
}

/**
 * Runs the lifecycle in one guest boot on a logged copy of each filesystem's base; returns
 * each filesystem's failures (what the guest reported) and writes its meta.json.
 */
async function record(fsTypes) {
  const disks = [];
  for (const fsType of fsTypes) {
    const dir = path.join(out, fsType);
    fs.mkdirSync(dir, { recursive: true });
    const base = path.join(dir, 'base.img');
    const espDisks = fsType === 'esp' ? buildEspDisks(dir) : (buildBase(fsType, base, dir), null);
    const disk = path.join(dir, 'disk.img');
    fs.copyFileSync(base, disk);
    const logImg = path.join(dir, 'log.img');
    fs.writeFileSync(logImg, '');
    fs.truncateSync(logImg, LOG_SIZE);
    disks.push(disk, logImg, ...(espDisks ? [espDisks.sys] : []));
  }
  const r = await boot({ guest, logBase: path.join(out, 'guest'), step: guestScript(fsTypes), disks });
  log(`guest ${r.ended} after ${r.seconds.toFixed(0)}s (${r.consoleLog})`);
  const failures = new Map();
  for (const fsType of fsTypes) {
    const marks = (fsType === 'esp' ? ESP_STEPS : STEPS).filter((s) => s.mark).map((s) => s.mark);
    const dir = path.join(out, fsType);
    const f = [];
    const got = new Map([...r.results].filter(([k]) => k.startsWith(`${fsType}.`)).map(([k, v]) => [k.slice(fsType.length + 1), v]));
    if (r.results.get('done') !== 'ok') f.push(`the guest did not finish (${r.ended}; error: ${r.results.get('error') ?? 'none reported'}; see ${r.resultsLog} and ${r.consoleLog})`);
    // "@FS.op-NAME CODE EXPECTED TIME" per CLI operation.
    const ops = [...got].filter(([k]) => k.startsWith('op-'));
    for (const [k, v] of ops) {
      const [code, want] = v.split(' ');
      if (code !== want) f.push(`${k} exited ${code}, expected ${want}`);
    }
    if (got.get('marks') !== String(marks.length)) f.push(`the guest made ${got.get('marks') ?? 'no'} marks, expected ${marks.length}`);
    log(`${fsType}: ${ops.map(([k, v]) => `${k.slice(3)} ${v.split(' ')[2]}`).join(', ')}`);
    const edited = [...got].filter(([k]) => k.startsWith('edited-')).map(([, v]) => v);
    const reported = (prefix) => Object.fromEntries([...got].filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v]));
    const meta =
      fsType === 'esp'
        ? { marks, current: reported('current-'), kernels: reported('kernel-'), digests: imageDigests() }
        : { sysrootDir: SYSROOT_DIR, varDir: VAR_DIR, localEditPaths: LOCAL_EDIT_PATHS, marks, edited };
    fs.writeFileSync(path.join(dir, 'meta.json'), JSON.stringify(meta));
    for (const f of ['disk.img', 'sys.img']) fs.rmSync(path.join(dir, f), { force: true });
    failures.set(fsType, f);
  }
  return failures;
}

const fsTypes = KINDS.filter((f) => only === null || only === f);
let recorded;
try {
  recorded = await record(fsTypes);
} catch (err) {
  const why = `recording threw: ${err.stderr?.toString() || err.stack}`;
  recorded = new Map(fsTypes.map((f) => [f, [why]]));
}

/** Replays one filesystem's log and checks its states (replay.check.ts under vitest); resolves with its summary. */
function replay(fsType) {
  const dir = path.join(out, fsType);
  const summaryFile = path.join(dir, 'summary.json');
  const t = Date.now();
  return new Promise((resolve) => {
    // Each filesystem's checks run beside the other's (two cores); their output is kept apart.
    const outFile = path.join(dir, 'replay.log');
    const fd = fs.openSync(outFile, 'w');
    const check = path.join(HERE, fsType === 'esp' ? 'esp.check.ts' : 'replay.check.ts');
    const v = spawn('npx', ['vitest', 'run', '--config', path.join(HERE, 'vitest.config.ts'), check], {
      cwd: REPO,
      stdio: ['ignore', fd, fd],
      env: { ...process.env, STAGEDROOT_REPLAY_DIR: dir, STAGEDROOT_REPLAY_FSTYPE: fsType, STAGEDROOT_REPLAY_SUMMARY: summaryFile },
    });
    v.on('exit', (code) => {
      fs.closeSync(fd);
      const summary = fs.existsSync(summaryFile) ? JSON.parse(fs.readFileSync(summaryFile, 'utf8')) : null;
      resolve({ summary, code, outFile, seconds: (Date.now() - t) / 1000 });
    });
  });
}

const replays = await Promise.all(fsTypes.map((f) => (recorded.get(f).length === 0 ? replay(f) : null)));
let passed = 0;
let failed = 0;
for (const [i, fsType] of fsTypes.entries()) {
  const dir = path.join(out, fsType);
  const failures = recorded.get(fsType);
  const rep = replays[i];
  const summary = rep?.summary ?? null;
  if (rep !== null) {
    if (summary === null) failures.push(`the replay wrote no summary (vitest exit ${rep.code}; see ${rep.outFile})`);
    else for (const x of summary.violations) failures.push(`violation at ${x.state}: ${x.message}${x.image ? ` (state image: ${x.image})` : ''}`);
    if (summary !== null && summary.violations.length === 0 && rep.code !== 0) failures.push(`the replay's vitest run failed (exit ${rep.code}; see ${rep.outFile})`);
  }
  if (summary !== null) console.log(`${fsType}: ${summary.flushPoints} flush points, ${summary.states} states, ${summary.violations.length} violations (${summary.checkedPoints} of the points checked, ${summary.entries} log entries; replay ${rep.seconds.toFixed(0)}s)`);
  const ok = failures.length === 0;
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok' : 'FAIL'} ${fsType}`);
  for (const f of failures.slice(0, 20)) console.log(`    ${f}`);
  if (failures.length > 20) console.log(`    ... and ${failures.length - 20} more (${dir}/summary.json)`);
  if (ok) for (const f of ['base.img', 'log.img']) fs.rmSync(path.join(dir, f), { force: true });
}
fs.rmSync(guest.img, { force: true });
log(`done in ${((Date.now() - started) / 1000).toFixed(0)}s; logs in ${out}`);
console.log(`crash-replay: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
