/**
 * The host side of the crash replay (run by run.mjs, one filesystem per run): every state
 * planStates yields from the guest's log is built on a copy of the base image and checked.
 *
 * At each state: the filesystem mounts (its journal/log recovered), `e2fsck -fn` or
 * `xfs_repair -n` finds it clean, the state is readable before recovery, `Sysroot.open`
 * (the built library) recovers it and the invariants of docs/invariants.md hold
 * (expectConsistent: current, staged, fallback, tries, boot files, no leftovers, every
 * ready tree complete per its manifest; the trees of the deployments that existed at the
 * last mark unchanged), the shared /var holds the synced file of every mark reached, and a
 * second `open` recovers nothing and leaves the same sysroot.
 *
 * Env: STAGEDROOT_REPLAY_DIR (base.img, log.img, meta.json), STAGEDROOT_REPLAY_FSTYPE,
 * STAGEDROOT_REPLAY_SUMMARY (where the counts go), STAGEDROOT_REPLAY_BUDGET,
 * STAGEDROOT_REPLAY_SUBSETS, STAGEDROOT_REPLAY_SEED.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect, test } from 'vitest';
import type * as Lib from '../../src/index.js';
import type { Sysroot } from '../../src/sysroot.js';
import { hashTree } from '../../src/testing/index.js';
import { DIST_INDEX, requireDist } from '../helpers/crash.js';
import { expectConsistent, expectReadable, hashDeployments } from '../helpers/invariants.js';
import { readLog } from './log-writes.js';
import { StateImages } from './state-images.js';
import { planOptionsFromEnv, planStates } from './states.js';

const DIR = process.env.STAGEDROOT_REPLAY_DIR ?? '';
const FS_TYPE = process.env.STAGEDROOT_REPLAY_FSTYPE ?? '';
const SUMMARY = process.env.STAGEDROOT_REPLAY_SUMMARY ?? '';

/** What run.mjs writes beside the log (meta.json). */
interface Meta {
  sysrootDir: string;
  varDir: string;
  localEditPaths: string[];
  /** The lifecycle's marks (the kernel adds its own at the end: no /var file). */
  marks: string[];
  /** The deployments whose etc/ the guest edited as the running system. */
  edited: string[];
}

interface Violation {
  state: string;
  message: string;
  image?: string;
}

function sh(cmd: string, args: string[]): void {
  execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The filesystem check; throws with its output when it finds anything. */
function fsck(img: string): void {
  const [cmd, args] = FS_TYPE === 'xfs' ? ['xfs_repair', ['-n', img]] : ['e2fsck', ['-fn', img]];
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) throw new Error(`${cmd} cannot run: ${r.error.message}`);
  if (r.status !== 0) {
    // The whole report beside the state (the message keeps its findings, not only its tail),
    // and a second run on the same image: a finding that does not come back is the check's.
    const again = spawnSync(cmd, args, { encoding: 'utf8' });
    const output = `${r.stdout}${r.stderr}`;
    fs.writeFileSync(path.join(DIR, `fsck-${path.basename(img)}.txt`), `${output}\n--- again: exit ${again.status}\n${again.stdout}${again.stderr}`);
    const findings = output.split('\n').filter((l) => l.trim() !== '' && !/^(Phase \d|\s+- |No modify flag|e2fsck \d|Pass \d)/.test(l));
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.status} (again: ${again.status}):\n${findings.slice(0, 20).join('\n')}`);
  }
}

/**
 * Mounts `img` on its own loop device. Each state is a new file: `mount -o loop` would
 * reuse a loop device still attached to an earlier file of the same name, page cache and
 * all, and show (and write back) that earlier state's blocks.
 */
function mount(img: string, mnt: string): string {
  const dev = execFileSync('losetup', ['--find', '--show', img], { encoding: 'utf8' }).trim();
  try {
    // nouuid: XFS refuses a second mount of a UUID, and every state of a run shares the base's.
    sh('mount', ['-t', FS_TYPE, ...(FS_TYPE === 'xfs' ? ['-o', 'nouuid'] : []), dev, mnt]);
  } catch (err) {
    sh('losetup', ['-d', dev]);
    throw err;
  }
  return dev;
}

function umount(mnt: string, dev: string): void {
  sh('umount', [mnt]);
  sh('losetup', ['-d', dev]);
}

test(`crash replay of the ${FS_TYPE} log`, async () => {
  if (!DIR || !FS_TYPE || !SUMMARY) throw new Error('run by test/crash-replay/run.mjs (STAGEDROOT_REPLAY_DIR, _FSTYPE, _SUMMARY unset)');
  requireDist();
  const lib = (await import(DIST_INDEX)) as typeof Lib;
  // Where the guest's lifecycle put the sysroot and its /var files, and what it edited.
  const meta = JSON.parse(fs.readFileSync(path.join(DIR, 'meta.json'), 'utf8')) as Meta;
  const logPath = path.join(DIR, 'log.img');
  const log = readLog(logPath);
  const plan = planStates(log, planOptionsFromEnv());
  const marksInLog = log.entries.filter((e) => e.mark !== null).length;
  process.stderr.write(`crash-replay ${FS_TYPE}: ${log.entries.length} log entries, ${plan.flushPoints} flush points (${plan.checkedPoints} checked), ${marksInLog} marks, ${plan.states.length} states\n`);

  const work = fs.mkdtempSync(path.join(DIR, 'states-'));
  const mnt = path.join(work, 'mnt');
  fs.mkdirSync(mnt);
  const logFd = fs.openSync(logPath, 'r');
  const images = new StateImages(log, logFd, path.join(DIR, 'base.img'), work, plan.states);
  const violations: Violation[] = [];
  let hashes: Map<string, string> | undefined;
  const t0 = Date.now();
  try {
    for (const [i, s] of plan.states.entries()) {
      const stateImg = path.join(work, `state-${i}.img`);
      images.build(i, s, stateImg);
      let mounted: string | null = null;
      try {
        // Mount once to recover the journal/log (what a boot does), then check offline.
        umount(mnt, mount(stateImg, mnt));
        fsck(stateImg);
        mounted = mount(stateImg, mnt);
        const dir = path.join(mnt, meta.sysrootDir);
        const where = `${FS_TYPE} ${s.name}`;
        expectReadable(dir, where);
        const sysroot = (await lib.Sysroot.open(dir)) as unknown as Sysroot;
        const localEdits = { paths: meta.localEditPaths, ids: new Set(meta.edited) };
        expectConsistent(sysroot, dir, where, hashes, { localEdits });
        for (const m of s.marksReached.filter((x) => meta.marks.includes(x))) {
          const f = path.join(dir, meta.varDir, m);
          expect(fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : null, `${where}: /var file synced before mark ${m}`).toBe(`${m}\n`);
        }
        const once = { state: sysroot.state(), tree: hashTree(dir) };
        const again = (await lib.Sysroot.open(dir)) as unknown as Sysroot;
        expect(again.recovery, `${where}: a second open recovered again`).toEqual([]);
        expect({ state: again.state(), tree: hashTree(dir) }, `${where}: the sysroot after a second open`).toEqual(once);
        if (s.mark !== null) hashes = hashDeployments(sysroot, meta.localEditPaths);
      } catch (err) {
        const keep = violations.length < 5 ? path.join(DIR, `violation-${violations.length + 1}.img`) : undefined;
        if (mounted !== null) {
          try {
            umount(mnt, mounted);
            mounted = null;
          } catch {
            // reported below
          }
        }
        // The state as the power cut left it (before any mount), to look at or replay.
        if (keep) images.again(s, keep);
        const message = err instanceof Error ? err.message : String(err);
        violations.push({ state: s.name, message, image: keep });
        process.stderr.write(`crash-replay ${FS_TYPE}: VIOLATION at ${s.name}: ${message}\n`);
      } finally {
        if (mounted !== null) umount(mnt, mounted);
        fs.rmSync(stateImg, { force: true });
      }
      if ((i + 1) % 50 === 0) process.stderr.write(`crash-replay ${FS_TYPE}: ${i + 1}/${plan.states.length} states (${((Date.now() - t0) / 1000).toFixed(0)}s), ${violations.length} violations\n`);
    }
  } finally {
    fs.closeSync(logFd);
    fs.rmSync(work, { recursive: true, force: true });
    fs.writeFileSync(SUMMARY, JSON.stringify({ entries: log.entries.length, flushPoints: plan.flushPoints, checkedPoints: plan.checkedPoints, marks: marksInLog, states: plan.states.length, violations }, null, 2));
  }
  expect(violations).toEqual([]);
}, 24 * 3600_000);
