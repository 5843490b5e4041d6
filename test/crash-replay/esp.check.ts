/**
 * The host side of the ESP's crash replay (run by run.mjs, esp-lifecycle.mjs's log): at
 * every state planStates yields, the ESP is read as systemd-boot reads it (with mtools:
 * this host's kernel has no vfat) and checked:
 * - every stagedroot entry is either complete (title, version, sort-key, options naming its
 *   deployment, linux and initrd under stagedroot/HASH/) or empty (systemd-boot skips an
 *   entry without `linux`); at a mark, none is empty;
 * - every complete entry's kernel and initramfs are on the ESP, byte for byte the images
 *   of the kernel its deployment ships;
 * - the default (the highest version) boots the current deployment of the last mark reached
 *   or of the next one (the operation in between moved it); at a mark, exactly the current
 *   deployment the guest reported after the operation, and loader.conf selects stagedroot's
 *   entries. Before this check existed, a finalize's new entry on FAT was an empty file at
 *   the mark after it (the rename's directory entry had no cluster yet), and the machine
 *   booted the previous deployment after a power cut (seen in the real-boot test).
 *
 * Env as replay.check.ts's: STAGEDROOT_REPLAY_DIR (base.img, log.img, meta.json),
 * STAGEDROOT_REPLAY_SUMMARY, STAGEDROOT_REPLAY_BUDGET, _SEED (no subsets: see below).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect, test } from 'vitest';
import { readLog } from './log-writes.js';
import { StateImages } from './state-images.js';
import { planOptionsFromEnv, planStates, type CrashState } from './states.js';

const DIR = process.env.STAGEDROOT_REPLAY_DIR ?? '';
const SUMMARY = process.env.STAGEDROOT_REPLAY_SUMMARY ?? '';

/** What run.mjs writes beside the ESP's log. */
interface EspMeta {
  marks: string[];
  /** The current deployment after each mark's operation. */
  current: Record<string, string>;
  /** Each deployment's kernel version. */
  kernels: Record<string, string>;
  /** sha256 of each image by its name on the ESP (vmlinuz-V, initramfs-V.img). */
  digests: Record<string, string>;
}

/** A file of the FAT image, or null when it is not there (mtools: the host has no vfat). */
function readFat(img: string, p: string): Buffer | null {
  const r = spawnSync('mcopy', ['-n', '-i', img, `::${p}`, '-'], { env: { ...process.env, MTOOLS_SKIP_CHECK: '1' }, maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`mcopy cannot run: ${r.error.message}`);
  if (r.status !== 0) {
    if (/not found/.test(String(r.stderr))) return null;
    throw new Error(`mcopy of ${p} exited ${r.status}: ${String(r.stderr).trim()}`);
  }
  return r.stdout;
}

function listFat(img: string, dir: string): string[] {
  const r = spawnSync('mdir', ['-b', '-i', img, `::${dir}`], { encoding: 'utf8', env: { ...process.env, MTOOLS_SKIP_CHECK: '1' } });
  if (r.error) throw new Error(`mdir cannot run: ${r.error.message}`);
  if (r.status !== 0) {
    if (/not found/.test(r.stderr)) return [];
    throw new Error(`mdir of ${dir} exited ${r.status}: ${r.stderr.trim()}`);
  }
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => path.posix.basename(l.trim()));
}

const ENTRY = /^title .+\nversion (\d+)\nsort-key stagedroot\noptions (?:.* )?stagedroot\.deployment=(\d+)\nlinux \/(stagedroot\/[0-9a-f]{64})\/vmlinuz-(\S+)\ninitrd \/\3\/initramfs-\4\.img\n$/;

interface Entry {
  file: string;
  version: number;
  id: string;
  linux: string;
  initrd: string;
  kernel: string;
}

/** Checks one state's ESP; returns what systemd-boot would boot by default (a deployment id), or null when no entry would. */
function checkEsp(img: string, meta: EspMeta, atMark: boolean): string | null {
  const entries: Entry[] = [];
  for (const f of listFat(img, '/loader/entries').filter((n) => /^stagedroot-\d+\.conf$/.test(n))) {
    const text = readFat(img, `/loader/entries/${f}`)?.toString('utf8') ?? '';
    if (text === '') {
      if (atMark) throw new Error(`${f} is empty after the operation returned: systemd-boot skips it`);
      continue;
    }
    const m = ENTRY.exec(text);
    if (!m) throw new Error(`${f} is neither complete nor empty: ${JSON.stringify(text)}`);
    entries.push({ file: f, version: Number(m[1]), id: m[2]!, linux: `/${m[3]}/vmlinuz-${m[4]}`, initrd: `/${m[3]}/initramfs-${m[4]}.img`, kernel: m[4]! });
  }
  for (const e of entries) {
    expect(`stagedroot-${e.id}.conf`, `${e.file}: the deployment it names`).toBe(e.file);
    expect(e.kernel, `${e.file}: the kernel of deployment ${e.id}`).toBe(meta.kernels[e.id]);
    for (const p of [e.linux, e.initrd]) {
      const data = readFat(img, p);
      const digest = data === null ? 'missing' : createHash('sha256').update(data).digest('hex');
      expect(digest, `${e.file}: ${p} (${data?.length ?? 0} bytes)`).toBe(meta.digests[path.posix.basename(p)]);
    }
  }
  if (atMark && entries.length > 0) {
    const conf = readFat(img, '/loader/loader.conf')?.toString('utf8') ?? '';
    expect(conf.split('\n'), 'loader.conf selects stagedroot\'s entries').toContain('default stagedroot-*');
  }
  const top = entries.sort((a, b) => b.version - a.version)[0];
  return top?.id ?? null;
}

test('crash replay of the ESP log (systemd-boot entries on FAT)', () => {
  if (!DIR || !SUMMARY) throw new Error('run by test/crash-replay/run.mjs (STAGEDROOT_REPLAY_DIR, _SUMMARY unset)');
  const meta = JSON.parse(fs.readFileSync(path.join(DIR, 'meta.json'), 'utf8')) as EspMeta;
  for (const m of meta.marks) expect(meta.current[m], `the guest reported the current deployment at mark ${m}`).toMatch(/^\d+$/);
  const logPath = path.join(DIR, 'log.img');
  const log = readLog(logPath);
  // No subsets of the unflushed writes: FAT has no journal, and Linux's vfat writes one
  // fsync's directory blocks and FAT blocks with no flush between them, so a subset can hold
  // a directory entry whose clusters the FAT does not chain (or frees) whatever order the
  // writer keeps. stagedroot orders its ESP writes by fsyncs, each ending in a flush: the
  // states that order promises anything about are the flush points and the marks.
  const plan = planStates(log, planOptionsFromEnv({ subsets: 0 }));
  const marksInLog = log.entries.filter((e) => e.mark !== null).length;
  process.stderr.write(`crash-replay esp: ${log.entries.length} log entries, ${plan.flushPoints} flush points (${plan.checkedPoints} checked), ${marksInLog} marks, ${plan.states.length} states\n`);
  const work = fs.mkdtempSync(path.join(DIR, 'states-'));
  const logFd = fs.openSync(logPath, 'r');
  const images = new StateImages(log, logFd, path.join(DIR, 'base.img'), work, plan.states);
  const violations: { state: string; message: string; image?: string }[] = [];
  /** The current deployments the state may boot: the last mark's, and the next one's (the operation between them may have moved it). */
  const allowed = (s: CrashState): string[] => {
    const reached = s.marksReached.filter((m) => meta.marks.includes(m));
    const last = reached.at(-1);
    const next = meta.marks[last === undefined ? 0 : meta.marks.indexOf(last) + 1];
    return [last, next].filter((m): m is string => m !== undefined).map((m) => meta.current[m]!);
  };
  let marksChecked = 0;
  try {
    for (const [i, s] of plan.states.entries()) {
      const img = path.join(work, `state-${i}.img`);
      images.build(i, s, img);
      try {
        const atMark = s.mark !== null && meta.marks.includes(s.mark);
        const booted = checkEsp(img, meta, atMark);
        if (atMark) {
          marksChecked++;
          expect(booted, `the default entry at mark ${s.mark}`).toBe(meta.current[s.mark!]);
        } else if (s.marksReached.some((m) => meta.marks.includes(m))) {
          expect(allowed(s), `the default entry (the old or the new current deployment)`).toContain(booted);
        }
      } catch (err) {
        const keep = violations.length < 5 ? path.join(DIR, `violation-${violations.length + 1}.img`) : undefined;
        if (keep) images.again(s, keep);
        const message = err instanceof Error ? err.message : String(err);
        violations.push({ state: s.name, message, image: keep });
        process.stderr.write(`crash-replay esp: VIOLATION at ${s.name}: ${message}\n`);
      } finally {
        fs.rmSync(img, { force: true });
      }
    }
  } finally {
    fs.closeSync(logFd);
    fs.rmSync(work, { recursive: true, force: true });
    fs.writeFileSync(SUMMARY, JSON.stringify({ entries: log.entries.length, flushPoints: plan.flushPoints, checkedPoints: plan.checkedPoints, marks: marksInLog, states: plan.states.length, violations }, null, 2));
  }
  expect(marksChecked, 'marks checked').toBe(meta.marks.length);
  expect(violations).toEqual([]);
}, 24 * 3600_000);
