import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { finishDirectory, type CopyProgress, type CopyResult } from './copy-tree.js';
import { noFaults } from '../core/faults.js';
import { cheapPath, parseManifestLine } from '../manifests/manifest-line.js';
import { hostPath } from '../core/names.js';
import { comparePaths, isUnder } from '../core/paths.js';
import { ioError } from '../core/io-error.js';
import { runTreeTask, type TreeJobOptions } from '../jobs/tree-jobs.js';
import { treeTasks, type CopyArgs } from './tasks.js';

/** Where a part of a split copy starts: a manifest path and the byte offset of its line. */
export interface SplitPoint {
  path: string;
  offset: number;
}

/** Lines probed to weigh a manifest's regions (see splitPoints). */
const PROBES = 64;
/** What a line costs a copy that does not link it (a file copied: open, copy, chown, xattrs, chmod, utimes), in links. */
export const COPIED_WEIGHT = 8;

/**
 * Points that cut a manifest into `parts` parts of about the same cost, found by reading
 * a line at PROBES evenly spaced offsets (no pass over the file): the stretch between two
 * probes costs its bytes, times `weight` of the paths at its ends (the lower of the two:
 * a stretch is copied only if both ends are). The copy's default policy links usr/ and
 * copies the rest, whose files cost several times a link each (COPIED_WEIGHT), so
 * cutting by bytes alone left the part with etc/ running well after the others (a CPU
 * profile of a 100,000-file stage on ext4: one copy worker 470 ms longer than the
 * other). Each point is the first whole line after an offset.
 */
export function splitPoints(manifest: string, parts: number, weight: (path: string) => number = () => 1): SplitPoint[] {
  const size = fs.statSync(manifest).size;
  const fd = fs.openSync(manifest, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  const buf = Buffer.allocUnsafe(64 * 1024);
  const probes: SplitPoint[] = [];
  try {
    const count = Math.max(PROBES, parts);
    for (let k = 1; k < count; k++) {
      const at = Math.floor((size * k) / count);
      const n = fs.readSync(fd, buf, 0, buf.length, at);
      const i = buf.subarray(0, n).indexOf(0x0a);
      const j = i === -1 ? -1 : buf.subarray(0, n).indexOf(0x0a, i + 1);
      if (j === -1) continue; // a line longer than the probe: no cut here
      const line = buf.toString('utf8', i + 1, j);
      const p = cheapPath(line) ?? parseManifestLine(line, manifest, `at byte ${at + i + 1}`).p;
      if (probes.length > 0 && comparePaths(p, probes[probes.length - 1]!.path) <= 0) continue;
      probes.push({ path: p, offset: at + i + 1 });
    }
  } finally {
    fs.closeSync(fd);
  }
  if (probes.length === 0) return [];
  // The cost of the stretch up to each probe, then the probes nearest each k-th share of it.
  const w = probes.map((q) => weight(q.path));
  const cost: number[] = [];
  let total = 0;
  for (let k = 0; k <= probes.length; k++) {
    const from = k === 0 ? 0 : probes[k - 1]!.offset;
    const to = k === probes.length ? size : probes[k]!.offset;
    total += (to - from) * Math.min(w[k - 1] ?? w[0]!, w[k] ?? w[probes.length - 1]!);
    cost.push(total);
  }
  const out: SplitPoint[] = [];
  for (let part = 1, k = 0; part < parts; part++) {
    const share = (total * part) / parts;
    while (k < probes.length - 1 && cost[k]! < share) k += 1;
    if (out.length > 0 && out[out.length - 1]!.offset >= probes[k]!.offset) continue;
    out.push(probes[k]!);
  }
  return out;
}

/** The directories above a tree path ("a", "a/b" for "a/b/c"). */
function ancestors(p: string): string[] {
  const out: string[] = [];
  for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) out.push(p.slice(0, i));
  return out;
}

/**
 * Copies a tree as copyTree does, split into parts that run on worker threads side by
 * side (both cores of a small machine): each part walks its range of the tree in
 * manifest order and writes its own manifest, read back in order by the caller. The
 * directories the parts share (those above a cut) are made first and finished last,
 * here; files copied (not linked) that are links of each other across two parts are
 * linked again afterwards, as one copy would have linked them.
 */
export async function copyTreeSplit(args: CopyArgs, parts: number, jobs: TreeJobOptions): Promise<{ result: CopyResult; manifests: string[] }> {
  const linked = (p: string): boolean => args.policy.hardlinkPrefixes.some((h) => isUnder(p, h)) && !(args.policy.copyPrefixes ?? []).some((c) => isUnder(p, c));
  const points = args.srcManifest === undefined ? [] : splitPoints(args.srcManifest, parts, (p) => (linked(p) ? 1 : COPIED_WEIGHT));
  if (points.length === 0) {
    return { result: await runTreeTask(treeTasks.copyTree, args, jobs), manifests: args.manifestOut === undefined ? [] : [args.manifestOut] };
  }
  const faults = jobs.faults ?? noFaults;
  const spine = [...new Set(points.flatMap((p) => ancestors(p.path)))].sort(comparePaths);
  for (const rel of spine) {
    const dst = hostPath(args.dst, rel);
    try {
      fs.mkdirSync(dst, { mode: 0o700 });
    } catch (err) {
      throw ioError(err, rel, String(dst), 'sysroot');
    }
    faults.afterMutation('mkdir', String(dst));
  }

  // One failing part stops the others.
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  jobs.signal?.addEventListener('abort', onAbort, { once: true });
  const bounds = [null, ...points.map((p) => p.path), null];
  const done: CopyProgress[] = points.map(() => ({ done: 0, total: null, bytes: 0 })).concat([{ done: 0, total: null, bytes: 0 }]);
  let nextReport = 0;
  const report = (): void => {
    const sum = done.reduce((a, p) => ({ done: a.done + p.done, total: args.total ?? null, bytes: a.bytes + p.bytes }), { done: 0, total: args.total ?? null, bytes: 0 } as CopyProgress);
    if (sum.done >= nextReport) {
      jobs.onProgress?.(sum as never);
      nextReport = sum.done + 1000;
    }
  };
  // Each part writes its own manifest, unless the copy trusts the source's (then none).
  const out = args.manifestOut;
  const manifests = out === undefined ? [] : bounds.slice(1).map((_, k) => `${out}.${k}`);
  const runs = bounds.slice(1).map((_, k) =>
    runTreeTask(
      treeTasks.copyTree,
      { ...args, manifestOut: out === undefined ? undefined : manifests[k], total: null, part: { range: { lo: bounds[k]!, hi: bounds[k + 1]! }, spine, srcManifestStart: k === 0 ? 0 : points[k - 1]!.offset } },
      {
        ...jobs,
        signal: stop.signal,
        onProgress: (p: CopyProgress) => {
          done[k] = p;
          report();
        },
      },
    ).catch((err: unknown) => {
      stop.abort();
      throw err;
    }),
  );
  const settled = await Promise.allSettled(runs);
  jobs.signal?.removeEventListener('abort', onAbort);
  // The first failure in tree order is the one to report (an abort of the others follows from it).
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected' && !(r.reason instanceof StagedrootError && r.reason.code === 'ABORTED'));
  const aborted = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed ?? aborted) throw (failed ?? aborted)!.reason;
  const results = settled.map((r) => (r as PromiseFulfilledResult<CopyResult>).value);

  relinkAcrossParts(args.dst, results, faults);
  for (const rel of [...spine].reverse()) finishDirectory(args.src, args.dst, rel, args, faults);
  finishDirectory(args.src, args.dst, null, args, faults);
  const result: CopyResult = { entries: 0, bytes: 0, hardlinked: 0, copied: 0, hashed: 0 };
  for (const r of results) {
    result.entries += r.entries;
    result.bytes += r.bytes;
    result.hardlinked += r.hardlinked;
    result.copied += r.copied;
    result.hashed += r.hashed;
  }
  jobs.onProgress?.({ done: result.entries, total: args.total ?? result.entries, bytes: result.bytes } as never);
  return { result, manifests };
}

/** Files of one inode that two parts each copied: the names in the later parts become links of the first copy. */
function relinkAcrossParts(dst: string, results: CopyResult[], faults: typeof noFaults): void {
  const first = new Map<string, { rel: string; part: number }>();
  results.forEach((r, part) => {
    for (const [key, rel] of r.multiLinked ?? []) {
      const earlier = first.get(key);
      if (earlier === undefined) {
        first.set(key, { rel, part });
        continue;
      }
      if (earlier.part === part) continue; // linked within the part already
      const to = hostPath(dst, rel);
      try {
        fs.unlinkSync(to);
        fs.linkSync(hostPath(dst, earlier.rel), to);
      } catch (err) {
        throw ioError(err, rel, String(to), 'sysroot');
      }
      faults.afterMutation('link', String(to));
    }
  });
}
