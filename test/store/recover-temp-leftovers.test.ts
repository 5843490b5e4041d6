/**
 * Recovery removes what a write via a temp that a crash cut short leaves: the one temp
 * scheme's names (`.stagedroot-tmp-PID-HEX`) and the names older versions used (a
 * sysroot left by one after a crash), in every directory written via a temp; in a boot
 * directory it shares with others, only the names of stagedroot's own files.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { copyOut } from '../../src/fs/trees/copy-entry.js';

let t: TempSysroot | undefined;
let boot: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (boot) fs.rmSync(boot, { recursive: true, force: true });
  t = boot = undefined;
});

const KERNEL_TREE = { 'etc/os-release': 'ID=test\n', 'usr/lib/modules/6.1.0-1/vmlinuz': 'kernel 6.1.0-1\n' };
const NEW = '.stagedroot-tmp-4242-0123456789ab';

describe('recovery of temp leftovers', () => {
  it('removes the one scheme and the old names in the sysroot, hook-runs/, trusted-keys/, deploy/ID/ and the boot directory; leaves what is not its own', async () => {
    boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-leftovers-'));
    t = await tempSysroot({ tree: KERNEL_TREE, bootDir: boot });
    const d = t.dir;
    const put = (p: string, dir = false): void => {
      fs.mkdirSync(path.dirname(p), { recursive: true });
      if (dir) fs.mkdirSync(p);
      else fs.writeFileSync(p, 'half\n');
    };
    const leftovers = [
      // this version's, of a file and of a directory (a kernel's copy)
      path.join(d, NEW),
      path.join(d, 'hook-runs', NEW),
      path.join(d, 'trusted-keys', NEW),
      path.join(d, 'deploy', '0001', NEW),
      // older versions': the durable layer's `.NAME.tmp-PID-R` / `.NAME.new-PID-R`
      path.join(d, '.state.json.tmp-77-0a1b2c3d'),
      path.join(d, '.state.json.bak.tmp-77-0a1b2c3d'),
      path.join(d, '.current.new-77-0a1b2c3d'),
      path.join(d, '.fallback.new-77-0a1b2c3d'),
      path.join(d, 'deploy', '0001', '.merging.json.tmp-77-0a1b2c3d'),
      path.join(d, 'hook-runs', '.finalize.json.tmp-77-0a1b2c3d'),
      // the boot directory: the loader symlink's old temp, a kernel copy's old and new temp
      path.join(boot, '.loader.new-77-0a1b2c3d'),
      path.join(boot, NEW),
      path.join(boot, 'stagedroot', 'f'.repeat(64) + '.tmp'),
      path.join(boot, 'stagedroot', NEW),
    ];
    for (const p of leftovers) put(p, p.endsWith('.tmp'));
    // Not stagedroot's: a file of another program in the boot directory that looks like an old temp name.
    const foreign = path.join(boot, '.grub.cfg.new-77-0a1b2c3d');
    put(foreign);
    const s = await Sysroot.open(d);
    for (const p of leftovers) expect(fs.existsSync(p), p).toBe(false);
    expect(fs.existsSync(foreign)).toBe(true);
    expect(s.status().current).toBe('0001');
    expect((await s.verify()).drift).toEqual([]);
    // A second recovery has nothing left to do.
    const again = await Sysroot.open(d);
    expect(again.status().current).toBe('0001');
  });

  it('copyOut (a redo of a kept copy) removes the temp copies a crash left beside its place, old and new names', () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-kept-leftovers-'));
    try {
      fs.writeFileSync(path.join(base, 'src'), 'local\n');
      const kept = path.join(base, 'kept', '0002.partial', 'etc');
      fs.mkdirSync(kept, { recursive: true });
      fs.writeFileSync(path.join(kept, 'app.conf.tmp-77'), 'half\n'); // an older version's
      fs.mkdirSync(path.join(kept, NEW)); // this version's (a directory copy)
      fs.writeFileSync(path.join(kept, 'other.conf'), 'kept\n');
      expect(copyOut(path.join(base, 'src'), path.join(kept, 'app.conf'))).toBe(true);
      expect(fs.readdirSync(kept).sort()).toEqual(['app.conf', 'other.conf']);
      expect(fs.readFileSync(path.join(kept, 'app.conf'), 'utf8')).toBe('local\n');
    } finally {
      fs.rmSync(base, { recursive: true, force: true });
    }
  });
});
