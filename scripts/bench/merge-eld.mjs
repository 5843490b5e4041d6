/**
 * The event-loop delay of stage and finalize (its /etc merge) at one tree size, for
 * two builds of the library in interleaved rounds (the machine's disk is noisy: runs
 * minutes apart do not compare):
 *   node scripts/bench/merge-eld.mjs DIST_A DIST_B [FILES=100000] [ROUNDS=3]
 * Generates the bench tree in a temp dir under /var/tmp (about 1 GB at 100,000 files),
 * initialises a sysroot from it, then each round, for A and B: a local edit in the
 * booted etc/, a stage of the bench update, a finalize (merge into the staged tree).
 * The booted deployment stays the first one, so every finalize merges its etc/; after
 * each finalize a rollback makes the first one current again and prune removes the other.
 * Prints one JSON line a measurement; removes the temp dir at the end.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { generate } from './generate-tree.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const [distA, distB, filesArg, roundsArg] = process.argv.slice(2);
if (!distA || !distB) throw new Error('usage: merge-eld.mjs DIST_A DIST_B [FILES] [ROUNDS]');
const files = Number(filesArg ?? 100000);
const rounds = Number(roundsArg ?? 3);
const dir = fs.mkdtempSync(path.join('/var/tmp', 'merge-eld-'));
const child = (dist, ...args) => JSON.parse(execFileSync(process.execPath, [path.join(here, 'merge-eld-child.mjs'), dist, ...args], { encoding: 'utf8' }).trim().split('\n').pop());
try {
  const gen = generate(dir, files, 42);
  const sysrootDir = path.join(dir, 'stagedroot');
  const { Sysroot } = await import(pathToFileURL(path.resolve(distA, 'index.js')).href);
  await Sysroot.init(sysrootDir, { fromDirectory: gen.base, label: 'base' });
  const live = path.join((await Sysroot.open(sysrootDir)).treePath('0001'), 'etc');
  for (let r = 0; r < rounds; r++) {
    for (const [name, dist] of [['A', distA], ['B', distB]]) {
      fs.writeFileSync(path.join(live, `local-${name}-${r}.conf`), `a local change ${r}\n`);
      const s = child(dist, sysrootDir, 'stage', gen.specPath);
      const f = child(dist, sysrootDir, 'finalize');
      console.log(JSON.stringify({ round: r, build: name, stageMs: s.ms, stageEldMaxMs: s.eldMaxMs, finalizeMs: f.ms, finalizeEldMaxMs: f.eldMaxMs }));
      // Back to the first deployment (not measured): the next finalize then supersedes
      // nothing, and the one it made is pruned.
      const sr = await Sysroot.open(sysrootDir);
      await sr.rollback();
      await sr.prune({ keep: 1 });
    }
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
