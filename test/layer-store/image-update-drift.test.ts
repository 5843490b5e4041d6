import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { reboot, tempSysroot } from '../../src/testing/index.js';
import { describeTree, expectSameLinks, freshApply, makeTar, writeLayout, type GenEntry } from './helpers.js';

/**
 * Issue 29's fidelity requirement for an image update staged from the booted tree (its
 * image's layers a prefix of the new one's): the staged tree is the fresh apply of the new
 * image, whatever the running system changed in its tree outside usr/ (a file added under
 * /opt and /root, an etc/ file edited, a var/ file of a lower layer deleted from the shared
 * /var); the etc/ edit is carried by finalize's merge, as for any other source, and the
 * image's var/ entries are the shared /var's initial content as a fresh apply's are.
 */
const NO_CHECKS = { builtins: { unsafeModes: false, wantsLinks: false, requiredPaths: false, systemdVerify: false, freeSpace: false } } as const;

const lower: GenEntry[] = [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'dir', path: 'usr/bin', mode: 0o755 },
  { type: 'file', path: 'usr/bin/tool', content: 'tool v1\n', mode: 0o755, mtime: 1_500_000_000 },
  { type: 'hardlink', path: 'usr/bin/tool2', target: 'usr/bin/tool' },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'file', path: 'etc/app.conf', content: 'setting=1\n', mode: 0o644, mtime: 1_500_000_000 },
  { type: 'file', path: 'etc/keep.conf', content: 'keep\n', mode: 0o600, mtime: 1_500_000_000, xattrs: [['user.k', Buffer.from('v')]] },
  { type: 'dir', path: 'var', mode: 0o755 },
  { type: 'dir', path: 'var/lib', mode: 0o755 },
  { type: 'file', path: 'var/lib/state', content: 'state\n', mode: 0o644, mtime: 1_500_000_000 },
  { type: 'dir', path: 'opt', mode: 0o755 },
];
const upper: GenEntry[] = [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'dir', path: 'usr/bin', mode: 0o755 },
  { type: 'file', path: 'usr/bin/new', content: 'new\n', mode: 0o755, mtime: 1_600_000_000 },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'file', path: 'etc/other.conf', content: 'other\n', mode: 0o644, mtime: 1_600_000_000 },
];

const hex = (s: string): string => Buffer.from(s).toString('hex');
/** The image's entries (what a stage adds beside them left out; var/ is shared, its mount point alone in the tree). */
const ofImage = (lines: string[]): string[] => lines.filter((l) => l.startsWith(`${hex('var')} `) || ['usr', 'etc', 'opt', 'root'].some((n) => l.startsWith(`${hex(n)} `) || l.startsWith(`${hex(n)}2f`)));

describe('an image update staged from the booted tree whose running system drifted outside usr/', () => {
  it('stages the fresh apply of the new image; finalize carries the etc/ edit', async () => {
    const t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    try {
      const v1 = path.join(t.scratch, 'v1');
      const v2 = path.join(t.scratch, 'v2');
      writeLayout(v1, [{ tar: makeTar(lower) }]);
      const layers2 = writeLayout(v2, [{ tar: makeTar(lower) }, { tar: makeTar(upper) }]);
      const reference = path.join(t.scratch, 'fresh');
      await freshApply(v2, reference);
      const r1 = await t.sysroot.stage(v1, NO_CHECKS);
      await reboot(t.sysroot);
      expect(t.sysroot.status().booted).toBe(r1.id);

      // The running system's changes in its tree.
      const run = r1.path;
      fs.writeFileSync(path.join(run, 'opt/added'), 'local\n');
      fs.mkdirSync(path.join(run, 'root'), { mode: 0o700 });
      fs.writeFileSync(path.join(run, 'root/.history'), 'ls\n');
      fs.writeFileSync(path.join(run, 'etc/app.conf'), 'setting=2\n');
      fs.chmodSync(path.join(run, 'etc/keep.conf'), 0o644);
      // var/ is shared (the default): the machine's /var, outside the deployment's tree.
      const liveVar = path.join(t.dir, 'shared', 'var');
      expect(fs.readFileSync(path.join(liveVar, 'lib/state'), 'utf8')).toBe('state\n');
      fs.unlinkSync(path.join(liveVar, 'lib/state'));

      let copied = false;
      const r2 = await t.sysroot.stage(v2, { ...NO_CHECKS, onProgress: (p) => void (p.phase === 'copy' && p.done > 0 ? (copied = true) : undefined) });
      expect(t.sysroot.status().deployments.find((d) => d.id === r2.id)!.origin?.layers).toEqual(layers2.map((l) => l.diffId));
      // Still staged from the booted tree (its usr/ linked), not rebuilt from the store whole.
      expect(copied).toBe(true);
      expect(ofImage(describeTree(r2.path))).toEqual(ofImage(describeTree(reference)));
      expectSameLinks(reference, r2.path);
      expect(fs.existsSync(path.join(r2.path, 'opt/added'))).toBe(false);
      expect(fs.existsSync(path.join(r2.path, 'root'))).toBe(false);
      expect((await t.sysroot.verify(r2.id)).drift).toEqual([]);

      // The next boot: the etc/ edit and mode change carried by finalize's merge, as for any source.
      await reboot(t.sysroot);
      expect(t.sysroot.status().booted).toBe(r2.id);
      expect(fs.readFileSync(path.join(r2.path, 'etc/app.conf'), 'utf8')).toBe('setting=2\n');
      expect(fs.statSync(path.join(r2.path, 'etc/keep.conf')).mode & 0o777).toBe(0o644);
      expect(fs.readFileSync(path.join(r2.path, 'etc/other.conf'), 'utf8')).toBe('other\n');
      // The image's var/ content is initial content of the shared /var, as a fresh apply offers it: the deleted file comes back.
      expect(fs.readFileSync(path.join(liveVar, 'lib/state'), 'utf8')).toBe('state\n');
    } finally {
      t.cleanup();
    }
  }, 60_000);
});
