import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { execaSync } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adoptRoot } from '../../src/install/adopt.js';
import { PACKAGE_DBS } from '../../src/persistent-dirs/package-db.js';
import { countingHook } from '../../src/testing/faults.js';
import { Sysroot } from '../../src/sysroot.js';
import { buildTree, hashTree } from '../../src/testing/index.js';
import { CLI, CRASH_CLI, cli } from '../helpers/cli.js';
import { requireDist, scratchDir } from '../helpers/crash.js';
import { unavailable } from '../helpers/mounts.js';

/** A small Debian-like machine: OS, config, package records, data, runtime leftovers. */
function machineTree(root: string): void {
  buildTree(root, {
    'usr/bin/tool': { content: '#!/bin/sh\necho tool\n', mode: 0o755 },
    'usr/lib/os-release': 'ID=debian\n',
    'usr/sbin/init': { content: '#!/bin/sh\n', mode: 0o755 },
    'etc/hostname': 'machine\n',
    'etc/fstab': 'UUID=x / ext4 errors=remount-ro 0 1\n',
    'var/lib/dpkg/status': 'Package: tool\nStatus: install ok installed\n',
    'var/lib/dpkg/info/tool.list': '/usr/bin/tool\n',
    'var/lib/apt/extended_states': 'Package: tool\nAuto-Installed: 0\n',
    'var/cache/debconf/config.dat': 'Name: tool/question\nValue: yes\n',
    'var/log/syslog': 'booted\n',
    'home/alice/notes': 'mine\n',
    'root/.bashrc': 'PS1=#\n',
    'srv/www/index.html': '<h1>hi</h1>\n',
    'opt/app/run': { content: 'app\n', mode: 0o755 },
    'boot/vmlinuz-6.1.0-1-amd64': 'kernel\n',
    'boot/initrd.img-6.1.0-1-amd64': 'initrd\n',
    'tmp/scratch': 'junk\n',
    'proc/': { dir: true, mode: 0o555 },
    'sys/': { dir: true, mode: 0o555 },
    'dev/null-ish': 'not a device\n',
    'run/lock/x': 'x\n',
    'mnt/data/': { dir: true },
    'media/bind/': { dir: true },
    swapfile: 'swap\n',
  });
  fs.symlinkSync('usr/bin', path.join(root, 'bin'));
  fs.symlinkSync('usr/sbin', path.join(root, 'sbin'));
}

const inode = (p: string): number => fs.lstatSync(p).ino;
const ROOT_EXCLUDE = ['stagedroot', 'etc/stagedroot', 'lost+found', 'mnt/data', 'media/bind'];

const why = process.getuid?.() !== 0 ? 'not root (loop mounts need root)' : !fs.existsSync('/dev/loop-control') ? 'no /dev/loop-control' : null;
if (why !== null) {
  describe('stagedroot adopt', () => unavailable(why));
} else {
  describe('stagedroot adopt: a machine on a loop-mounted ext4, with a tmpfs and a bind mount inside', () => {
    let base: string;
    let root: string;
    let loop: string | null = null;
    const mounted: string[] = [];
    let before: string;

    beforeAll(() => {
      base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-adopt-'));
      const img = path.join(base, 'root.img');
      root = path.join(base, 'root');
      fs.mkdirSync(root);
      fs.writeFileSync(img, '');
      fs.truncateSync(img, 64 * 1024 * 1024);
      execaSync('mkfs.ext4', ['-q', '-F', img]);
      loop = execaSync('losetup', ['-f', '--show', img]).stdout.trim();
      execaSync('mount', [loop, root]);
      mounted.push(root);
      machineTree(root);
      execaSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', path.join(root, 'mnt/data')]);
      mounted.push(path.join(root, 'mnt/data'));
      fs.writeFileSync(path.join(root, 'mnt/data/on-tmpfs'), 'other filesystem\n');
      // A bind mount of the same filesystem: same st_dev, only the mount table tells.
      execaSync('mount', ['--bind', path.join(root, 'opt'), path.join(root, 'media/bind')]);
      mounted.push(path.join(root, 'media/bind'));
      before = hashTree(root, { exclude: ROOT_EXCLUDE });
    });

    afterAll(() => {
      for (const m of mounted.reverse()) spawnSync('umount', [m]);
      if (loop) spawnSync('losetup', ['-d', loop]);
      fs.rmSync(base, { recursive: true, force: true });
    });

    it('makes the running root the first deployment: hardlinked (same inodes), etc/ copied, other mounts and the sysroot left out', async () => {
      const swaps = path.join(base, 'swaps');
      fs.writeFileSync(swaps, `Filename\tType\tSize\tUsed\tPriority\n${root}/swapfile file\t4\t0\t-2\n`);
      const warnings: string[] = [];
      const progress: number[] = [];
      const r = await adoptRoot({ root, swaps, onWarning: (m) => warnings.push(m), onProgress: (p) => progress.push(p.done) });
      const sysroot = path.join(root, 'stagedroot');
      expect(r).toMatchObject({ sysroot, id: '0001', alreadyAdopted: false, shared: ['var', 'home', 'root', 'srv'] });
      expect(r.hollow).toEqual(expect.arrayContaining(['media/bind', 'mnt/data', 'proc', 'run', 'sys', 'tmp', 'dev']));
      expect(r.omitted).toEqual(['lost+found', 'stagedroot', 'swapfile']);
      expect(progress.length).toBeGreaterThan(0);
      const tree = path.join(sysroot, 'deploy/0001/tree');
      // The OS: the same inodes (not copies), on the same filesystem.
      for (const f of ['usr/bin/tool', 'usr/lib/os-release', 'opt/app/run', 'boot/vmlinuz-6.1.0-1-amd64']) {
        expect(inode(path.join(tree, f)), f).toBe(inode(path.join(root, f)));
      }
      // /etc is mutable: a copy.
      expect(inode(path.join(tree, 'etc/hostname'))).not.toBe(inode(path.join(root, 'etc/hostname')));
      expect(fs.readFileSync(path.join(tree, 'etc/hostname'), 'utf8')).toBe('machine\n');
      // Shared directories: in the sysroot, hardlinked; the tree has empty mount points.
      expect(inode(path.join(sysroot, 'shared/var/log/syslog'))).toBe(inode(path.join(root, 'var/log/syslog')));
      expect(inode(path.join(sysroot, 'shared/home/alice/notes'))).toBe(inode(path.join(root, 'home/alice/notes')));
      expect(inode(path.join(sysroot, 'shared/root/.bashrc'))).toBe(inode(path.join(root, 'root/.bashrc')));
      expect(inode(path.join(sysroot, 'shared/srv/www/index.html'))).toBe(inode(path.join(root, 'srv/www/index.html')));
      for (const d of ['var', 'home', 'root', 'srv']) expect(fs.readdirSync(path.join(tree, d)), d).toEqual([]);
      // The package records travel with the deployment: copied under usr/, linked from the shared var.
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/lib/dpkg'))).toBe('/usr/lib/sysimage/dpkg');
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/lib/apt'))).toBe('/usr/lib/sysimage/apt');
      expect(fs.readFileSync(path.join(tree, 'usr/lib/sysimage/dpkg/info/tool.list'), 'utf8')).toBe('/usr/bin/tool\n');
      expect(inode(path.join(tree, 'usr/lib/sysimage/dpkg/status'))).not.toBe(inode(path.join(root, 'var/lib/dpkg/status')));
      expect(r.packageDbs).toEqual(PACKAGE_DBS.map((d) => d.var));
      // The maintainer scripts' state the machine had none of yet: an empty place in the tree, linked likewise.
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/lib/ucf'))).toBe('/usr/lib/sysimage/ucf');
      expect(fs.readdirSync(path.join(tree, 'usr/lib/sysimage/ucf'))).toEqual([]);
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/cache/debconf'))).toBe('/usr/lib/sysimage/debconf');
      expect(fs.readFileSync(path.join(tree, 'usr/lib/sysimage/debconf/config.dat'), 'utf8')).toBe('Name: tool/question\nValue: yes\n');
      // Other filesystems and runtime directories: empty; the sysroot, lost+found and swap: absent.
      for (const d of ['mnt/data', 'media/bind', 'tmp', 'proc', 'run', 'dev']) expect(fs.readdirSync(path.join(tree, d)), d).toEqual([]);
      expect(fs.statSync(path.join(tree, 'proc')).mode & 0o777).toBe(0o555);
      for (const d of ['stagedroot', 'lost+found', 'swapfile']) expect(fs.existsSync(path.join(tree, d)), d).toBe(false);
      expect(fs.readlinkSync(path.join(tree, 'bin'))).toBe('usr/bin');
      expect(fs.existsSync(path.join(tree, 'sysroot'))).toBe(true); // where prepare-root binds the physical root
      // The running root is as it was, but for the file that says where the sysroot is.
      expect(hashTree(root, { exclude: ROOT_EXCLUDE })).toBe(before);
      expect(fs.readFileSync(path.join(root, 'etc/stagedroot/environment'), 'utf8')).toContain('STAGEDROOT_SYSROOT=/stagedroot\n');
      expect(fs.readFileSync(path.join(root, 'mnt/data/on-tmpfs'), 'utf8')).toBe('other filesystem\n');
      // A sysroot like any other: its tree verifies against its manifest.
      const s = await Sysroot.open(sysroot);
      expect((await s.verify()).drift).toEqual([]);
      expect(s.status()).toMatchObject({ current: '0001', booted: '0001', shared: { var: path.join(sysroot, 'shared/var') } });
      expect(warnings.join('\n')).not.toContain('device');
    });

    it('derives the kernel arguments from the running kernel\'s, pointed at the sysroot', async () => {
      const { adoptedKernelArguments } = await import('../../src/install/adopt.js');
      expect(adoptedKernelArguments('BOOT_IMAGE=/boot/vmlinuz-6.1.0 root=UUID=abc ro quiet stagedroot=/old stagedroot.deployment=0003 initrd=x\n', '/stagedroot')).toEqual(['root=UUID=abc', 'ro', 'quiet', 'stagedroot=/stagedroot']);
    });

    it('a second run says it is adopted already (the CLI, --json) and changes nothing', async () => {
      const r = await cli(['adopt', '--root', root, '--json']);
      expect(r.code, r.err).toBe(0);
      expect(JSON.parse(r.out)).toMatchObject({ alreadyAdopted: true, id: '0001', sysroot: path.join(root, 'stagedroot') });
      expect(hashTree(root, { exclude: ROOT_EXCLUDE })).toBe(before);
    });

    it('refuses a sysroot inside another mount, in /etc, in a shared directory, or on another filesystem', async () => {
      for (const [sysroot, what] of [
        [path.join(root, 'mnt/data/sr'), 'inside /mnt/data'],
        [path.join(root, 'media/bind/sr'), 'inside /media/bind'],
        [path.join(root, 'etc/sr'), 'inside /etc'],
        [path.join(root, 'var/sr'), 'inside /var'],
        [path.join(base, 'elsewhere'), 'must be inside the root'],
        [root, 'must be inside the root'],
      ] as const) {
        const r = await cli(['adopt', '--root', root, '--sysroot', sysroot]);
        expect(r.code, sysroot).toBe(2);
        expect(r.err, sysroot).toContain(what);
      }
    });
  });

  describe('stagedroot adopt: killed at any point, the machine is as before and the next run completes', () => {
    let base: string;
    let root: string;
    let before: string;
    beforeAll(() => {
      requireDist();
      base = scratchDir('stagedroot-adopt-kill-');
      root = path.join(base, 'root');
      machineTree(root);
      before = hashTree(root, { exclude: ROOT_EXCLUDE });
    });
    afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

    it('after a kill at any of a spread of its writes', async () => {
      const sysroot = path.join(root, 'stagedroot');
      const counting = countingHook();
      await adoptRoot({ root, faults: counting });
      const clean = hashTree(path.join(sysroot, 'deploy/0001/tree'));
      const total = counting.count;
      expect(total).toBeGreaterThan(20);
      const points = [...new Set([1, Math.floor(total / 3), Math.floor((2 * total) / 3), total - 2, total - 1])];
      for (const n of points) {
        fs.rmSync(sysroot, { recursive: true, force: true });
        fs.rmSync(path.join(root, 'etc/stagedroot'), { recursive: true, force: true });
        const k = spawnSync(process.execPath, [CRASH_CLI, 'adopt', '--root', root], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_FAULT_KILL_AFTER: String(n) } });
        expect(k.signal, `kill after write ${n} of ${total}: ${k.stderr}`).toBe('SIGKILL');
        // The machine: untouched (it boots as before; nothing outside the sysroot was written).
        expect(hashTree(root, { exclude: ROOT_EXCLUDE }), `after write ${n}`).toBe(before);
        const committed = fs.existsSync(path.join(sysroot, 'state.json'));
        if (!committed) expect((await cli(['status', '--sysroot', sysroot])).code, `after write ${n}`).not.toBe(0);
        // The next run resumes: clears the leftovers and adopts (or finds the adoption done).
        const again = spawnSync(process.execPath, [CLI, 'adopt', '--root', root, '--json'], { encoding: 'utf8' });
        expect(again.status, again.stderr).toBe(0);
        expect(JSON.parse(again.stdout).alreadyAdopted).toBe(committed);
        expect(hashTree(path.join(sysroot, 'deploy/0001/tree')), `after write ${n}`).toBe(clean);
        expect(fs.readdirSync(path.join(sysroot, 'work'))).toEqual([]);
        const s = await Sysroot.open(sysroot);
        expect((await s.verify()).drift, `after write ${n}`).toEqual([]);
        expect(fs.readFileSync(path.join(root, 'etc/stagedroot/environment'), 'utf8')).toContain('STAGEDROOT_SYSROOT=/stagedroot\n');
      }
    }, 300_000);
  });
}
