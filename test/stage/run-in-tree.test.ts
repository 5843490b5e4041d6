import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adoptRoot } from '../../src/install/adopt.js';
import { PACKAGE_DBS } from '../../src/persistent-dirs/package-db.js';
import { Sysroot } from '../../src/sysroot.js';
import { hashTree } from '../../src/testing/index.js';
import { busyboxMachine, WHY_NO_RUN } from '../helpers/busybox-machine.js';
import { cli } from '../helpers/cli.js';
import { unavailable } from '../helpers/mounts.js';

const why = WHY_NO_RUN;
if (why !== null) {
  describe('stage --run', () => unavailable(why));
} else {
  describe('stage --run: a command in the new tree, in a private mount and PID namespace', () => {
    let base: string;
    let root: string;
    let sysroot: string;
    let canary: string;
    const run = async (cmd: string, ...more: string[]) => cli(['stage', '--run', cmd, '--sysroot', sysroot, '--no-verify-units', ...more]);

    beforeAll(async () => {
      base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-run-'));
      root = path.join(base, 'root');
      busyboxMachine(root);
      sysroot = path.join(root, 'stagedroot');
      await adoptRoot({ root });
      canary = path.join(base, 'canary');
      fs.writeFileSync(canary, 'host\n');
    });
    afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

    const tree = (id: string) => path.join(sysroot, 'deploy', id, 'tree');
    const status = async () => (await Sysroot.open(sysroot)).status();

    it('stages what the command writes (a private copy of the tree: the booted one never changes)', async () => {
      const booted = hashTree(tree('0001'));
      const r = await run('echo from-run > /etc/from-run && mkdir -p /usr/lib/new && echo lib > /usr/lib/new/file && echo v2 >> /usr/lib/tool.conf && echo "$DPKG_FORCE" > /etc/dpkg-force && echo streamed-line');
      expect(r.code, r.err).toBe(0);
      expect(r.err).toContain('streamed-line'); // the command's output, as progress on stderr
      const st = await status();
      expect(st.staged).toBe('0002');
      expect(fs.readFileSync(path.join(tree('0002'), 'etc/from-run'), 'utf8')).toBe('from-run\n');
      // dpkg's per-file fsync is skipped: the stage syncs the tree's filesystem before it commits.
      expect(fs.readFileSync(path.join(tree('0002'), 'etc/dpkg-force'), 'utf8')).toBe('unsafe-io\n');
      expect(fs.readFileSync(path.join(tree('0002'), 'usr/lib/tool.conf'), 'utf8')).toBe('version 1\nv2\n');
      // Appended in place, yet the booted tree is untouched: nothing was hardlinked.
      expect(hashTree(tree('0001'))).toBe(booted);
      expect(fs.statSync(path.join(tree('0002'), 'usr/bin/busybox')).ino).not.toBe(fs.statSync(path.join(tree('0001'), 'usr/bin/busybox')).ino);
      const s = await Sysroot.open(sysroot);
      expect((await s.verify('0002')).drift).toEqual([]);
      const delta = JSON.parse(fs.readFileSync(path.join(sysroot, 'deploy/0002/delta.json'), 'utf8')) as { changed: { p: string }[] };
      expect(delta.changed.map((e) => e.p)).toEqual(expect.arrayContaining(['etc/from-run', 'usr/lib/new/file', 'usr/lib/tool.conf']));
      expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ label: 'run' });
    });

    it('a failing command is a rejected update (exit 3) whose reason ends with its last lines', async () => {
      const r = await run('echo step one; echo it broke >&2; exit 7', '--json');
      expect(r.code).toBe(3);
      const out = JSON.parse(r.out) as { error: { code: string; message: string } };
      expect(out.error.code).toBe('COMMAND_FAILED');
      expect(out.error.message).toContain('exited 7');
      expect(out.error.message).toContain('it broke');
      const st = await status();
      expect(st.lastFailure).toMatchObject({ phase: 'apply' });
      expect(st.booted).toBe('0001');
      const t = await run('sleep 30', '--run-timeout', '1');
      expect(t.code, t.err).toBe(3);
      expect(t.err).toContain('timed out after 1s');
    });

    it('nothing of the running system is writable: not the host files, /proc/sys, /sys, the shared /var or the disks', async () => {
      const hostname = fs.readFileSync('/proc/sys/kernel/hostname', 'utf8');
      const sharedVar = hashTree(path.join(sysroot, 'shared/var'));
      const script = [
        `echo escaped > ${canary} 2>/dev/null && echo host-file-written >> /etc/report`,
        `echo evil > /proc/sys/kernel/hostname 2>/dev/null && echo proc-sys-written >> /etc/report`,
        `echo 1 > /sys/kernel/profiling 2>/dev/null && echo sys-written >> /etc/report`,
        `ls /dev | grep -q -e sd -e vd -e nvme && echo disks-visible >> /etc/report`,
        `echo state > /var/log/from-run && echo var-written >> /etc/report`,
        `test -e /stagedroot/state.json && echo sysroot-visible >> /etc/report`,
        `echo done >> /etc/report`,
      ].join('; ');
      const r = await run(script);
      expect(r.code, r.err).toBe(0);
      const id = (await status()).staged!;
      expect(fs.readFileSync(path.join(tree(id), 'etc/report'), 'utf8')).toBe('var-written\ndone\n');
      expect(fs.readFileSync(canary, 'utf8')).toBe('host\n');
      expect(fs.readFileSync('/proc/sys/kernel/hostname', 'utf8')).toBe(hostname);
      // /var was the command's own scratch: neither the shared /var nor the tree has it (finalize may carry what it created there).
      expect(hashTree(path.join(sysroot, 'shared/var'))).toBe(sharedVar);
      expect(fs.readdirSync(path.join(tree(id), 'var'))).toEqual([]);
      expect(fs.existsSync(path.join(sysroot, 'deploy', id, 'run-var'))).toBe(false);
    });

    it('the package records travel with the deployment: a change made by --run is in its tree, and a rollback goes back to the old records', async () => {
      const r = await run('printf "Package: newpkg\\nStatus: install ok installed\\n\\n" >> /var/lib/dpkg/status', '--label', 'install newpkg');
      expect(r.code, r.err).toBe(0);
      const s = await Sysroot.open(sysroot);
      const id = s.status().staged!;
      const db = (t: string) => fs.readFileSync(path.join(tree(t), 'usr/lib/sysimage/dpkg/status'), 'utf8');
      expect(db(id)).toContain('Package: newpkg');
      expect(db('0001')).not.toContain('newpkg');
      // The shared /var holds only the link: whichever deployment boots reads its own records.
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/lib/dpkg'))).toBe('/usr/lib/sysimage/dpkg');
      await s.finalize();
      await s.boot({ runDir: path.join(base, 'no-run') });
      expect(s.status()).toMatchObject({ current: id, booted: id });
      await s.markGood();
      const back = await s.rollback();
      expect(back.current).toBe('0001');
      expect(db(back.current)).not.toContain('newpkg');
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/lib/dpkg'))).toBe('/usr/lib/sysimage/dpkg');
    });

    it('the maintainer scripts\' state travels with the deployment too (debconf, ucf, deb-systemd-helper, initramfs-tools), even where the machine had none', async () => {
      const own = path.join(base, 'scripts-machine');
      busyboxMachine(own, { 'var/cache/debconf/config.dat': 'Name: base/question\nValue: old\n\n' });
      const sys = path.join(own, 'stagedroot');
      await adoptRoot({ root: own });
      const script = [
        `printf 'Name: newpkg/question\\nValue: yes\\n\\n' >> /var/cache/debconf/config.dat`,
        `echo 'd41d8cd98f00b204e9800998ecf8427e  /etc/newpkg.conf' >> /var/lib/ucf/hashfile`,
        'mkdir -p /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants',
        'touch /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/newpkg.service /var/lib/systemd/deb-systemd-helper-enabled/newpkg.service.dsh-also',
        'echo 0123 > /var/lib/initramfs-tools/6.1.0-20-amd64',
      ].join(' && ');
      const sharedBefore = hashTree(path.join(sys, 'shared/var'));
      const r = await cli(['stage', '--run', script, '--sysroot', sys, '--no-verify-units']);
      expect(r.code, r.err).toBe(0);
      const s = await Sysroot.open(sys);
      const id = s.status().staged!;
      const at = (t: string, p: string) => path.join(sys, 'deploy', t, 'tree', 'usr/lib/sysimage', p);
      const state = (t: string) => ({
        debconf: fs.readFileSync(at(t, 'debconf/config.dat'), 'utf8'),
        ucf: fs.existsSync(at(t, 'ucf/hashfile')),
        dsh: fs.existsSync(at(t, 'deb-systemd-helper-enabled/multi-user.target.wants/newpkg.service')),
        initramfs: fs.existsSync(at(t, 'initramfs-tools/6.1.0-20-amd64')),
      });
      expect(state(id)).toEqual({ debconf: 'Name: base/question\nValue: old\n\nName: newpkg/question\nValue: yes\n\n', ucf: true, dsh: true, initramfs: true });
      expect(state('0001')).toEqual({ debconf: 'Name: base/question\nValue: old\n\n', ucf: false, dsh: false, initramfs: false });
      // The shared /var was not written; it holds a link for each, which resolves in whichever deployment boots.
      expect(hashTree(path.join(sys, 'shared/var'))).toBe(sharedBefore);
      for (const db of PACKAGE_DBS) expect(fs.readlinkSync(path.join(sys, 'shared', db.var)), db.var).toBe(`/${db.usr}`);
      await s.finalize();
      await s.boot({ runDir: path.join(base, 'no-run') });
      await s.markGood();
      const back = await s.rollback();
      expect(back.current).toBe('0001');
      expect(state(back.current).ucf).toBe(false);
    });

    it('what the command creates under /var is the shared /var\'s initial content: added by finalize where the machine has nothing, never over its state', async () => {
      const own = path.join(base, 'var-machine');
      busyboxMachine(own);
      const sys = path.join(own, 'stagedroot');
      await adoptRoot({ root: own });
      const script = [
        'mkdir -p /var/lib/newpkg /var/log/newpkg /var/cache/apt/archives /var/www/html',
        'echo seed > /var/lib/newpkg/state',
        'echo page > /var/www/html/index.html',
        'ln -s state /var/lib/newpkg/current',
        'echo overwritten > /var/log/old.log',
        'echo download > /var/cache/apt/archives/x.deb',
        'echo scratch > /var/tmp/x',
      ].join(' && ');
      const sharedVar = path.join(sys, 'shared/var');
      const before = hashTree(sharedVar);
      const r = await cli(['stage', '--run', script, '--sysroot', sys, '--no-verify-units']);
      expect(r.code, r.err).toBe(0);
      expect(hashTree(sharedVar)).toBe(before);
      const s = await Sysroot.open(sys);
      await s.finalize();
      expect(fs.readFileSync(path.join(sharedVar, 'lib/newpkg/state'), 'utf8')).toBe('seed\n');
      expect(fs.readlinkSync(path.join(sharedVar, 'lib/newpkg/current'))).toBe('state');
      expect(fs.statSync(path.join(sharedVar, 'log/newpkg')).isDirectory()).toBe(true);
      expect(fs.readFileSync(path.join(sharedVar, 'www/html/index.html'), 'utf8')).toBe('page\n');
      // The machine's own state wins; the run's scratch and downloads are not carried.
      expect(fs.readFileSync(path.join(sharedVar, 'log/old.log'), 'utf8')).toBe('old\n');
      expect(fs.existsSync(path.join(sharedVar, 'cache/apt/archives/x.deb'))).toBe(false);
      expect(fs.existsSync(path.join(sharedVar, 'tmp/x'))).toBe(false);
      expect(fs.readlinkSync(path.join(sharedVar, 'lib/dpkg'))).toBe('/usr/lib/sysimage/dpkg');
    });

    it('a tree adopted before a kind of package state was listed: the command sees the machine\'s copy of it, and its change stays in the new tree', async () => {
      // Made as an older adoption left it: dpkg's database under usr/, debconf still a real directory in the shared /var.
      const own = path.join(base, 'older-machine');
      busyboxMachine(own, { 'var/cache/debconf/config.dat': 'Name: base/question\nValue: old\n\n' });
      fs.mkdirSync(path.join(own, 'usr/lib/sysimage'), { recursive: true });
      fs.renameSync(path.join(own, 'var/lib/dpkg'), path.join(own, 'usr/lib/sysimage/dpkg'));
      fs.symlinkSync('/usr/lib/sysimage/dpkg', path.join(own, 'var/lib/dpkg'));
      const sys = path.join(base, 'older-sysroot');
      await Sysroot.init(sys, { fromDirectory: own });
      const liveDebconf = path.join(sys, 'shared/var/cache/debconf/config.dat');
      expect(fs.lstatSync(path.dirname(liveDebconf)).isDirectory()).toBe(true);
      const r = await cli(['stage', '--run', 'cat /var/cache/debconf/config.dat && printf "Name: newpkg/question\\nValue: yes\\n\\n" >> /var/cache/debconf/config.dat', '--sysroot', sys, '--no-verify-units']);
      expect(r.code, r.err).toBe(0);
      expect(r.err).toContain('Name: base/question');
      const id = (await Sysroot.open(sys)).status().staged!;
      expect(fs.readFileSync(path.join(sys, 'deploy', id, 'tree/usr/lib/sysimage/debconf/config.dat'), 'utf8')).toBe('Name: base/question\nValue: old\n\nName: newpkg/question\nValue: yes\n\n');
      expect(fs.readFileSync(liveDebconf, 'utf8')).toBe('Name: base/question\nValue: old\n\n');
    });

    it('--bind DIR: the command sees a directory of the running system read-only at its path; the update gains no mount point', async () => {
      const pkgs = path.join(base, 'media', 'packages');
      fs.mkdirSync(pkgs, { recursive: true });
      fs.writeFileSync(path.join(pkgs, 'tool.deb'), 'package bytes\n');
      const r = await run(`cp ${pkgs}/tool.deb /etc/installed-from-bind && (touch ${pkgs}/written 2>/dev/null && echo writable || echo read-only) > /etc/bind-was`, '--bind', pkgs);
      expect(r.code, r.err).toBe(0);
      const id = (await status()).staged!;
      expect(fs.readFileSync(path.join(tree(id), 'etc/installed-from-bind'), 'utf8')).toBe('package bytes\n');
      expect(fs.readFileSync(path.join(tree(id), 'etc/bind-was'), 'utf8')).toBe('read-only\n');
      expect(fs.existsSync(path.join(pkgs, 'written'))).toBe(false);
    });

    it('--bind outside /tmp: its mount point is made in the tree for the command and taken away after it', async () => {
      const where = '/opt/stagedroot-test-media';
      fs.mkdirSync(where, { recursive: true });
      try {
        fs.writeFileSync(path.join(where, 'tool.deb'), 'from /opt\n');
        const cur = (await status()).current!;
        const hadOpt = fs.existsSync(path.join(tree(cur), 'opt'));
        const r = await run(`cp ${where}/tool.deb /etc/from-opt && (touch ${where}/written 2>/dev/null && echo writable || echo read-only) > /etc/bind-was`, '--bind', where);
        expect(r.code, r.err).toBe(0);
        const id = (await status()).staged!;
        expect(fs.readFileSync(path.join(tree(id), 'etc/from-opt'), 'utf8')).toBe('from /opt\n');
        expect(fs.readFileSync(path.join(tree(id), 'etc/bind-was'), 'utf8')).toBe('read-only\n');
        expect(fs.existsSync(path.join(tree(id), 'opt/stagedroot-test-media'))).toBe(false);
        expect(fs.existsSync(path.join(tree(id), 'opt'))).toBe(hadOpt);
        const delta = JSON.parse(fs.readFileSync(path.join(sysroot, 'deploy', id, 'delta.json'), 'utf8')) as { changed: { p: string }[] };
        expect(delta.changed.map((e) => e.p).filter((p) => p.startsWith('opt'))).toEqual([]);
      } finally {
        fs.rmSync(where, { recursive: true, force: true });
      }
    });

    it('--bind refuses what it cannot bind, naming it: a missing directory, a relative path, a namespace directory, without --run', async () => {
      const bad = async (why: RegExp, ...args: string[]) => {
        const r = await cli(['stage', '--sysroot', sysroot, '--no-verify-units', '--json', ...args]);
        expect(r.code, r.out + r.err).toBe(2);
        expect((JSON.parse(r.out) as { error: { message: string } }).error.message).toMatch(why);
      };
      await bad(/--bind \/nonexistent-stagedroot: no such directory/, '--run', 'true', '--bind', '/nonexistent-stagedroot');
      await bad(/absolute path, got "rel"/, '--run', 'true', '--bind', 'rel');
      await bad(/outside \/proc/, '--run', 'true', '--bind', '/var/cache');
      await bad(/--bind is for --run/, 'x.json', '--bind', base);
    });

    it('takes a SOURCE or --run, not both, not neither; no --dry-run with --run', async () => {
      expect((await cli(['stage', '--sysroot', sysroot])).code).toBe(2);
      expect((await cli(['stage', 'x.json', '--run', 'true', '--sysroot', sysroot])).code).toBe(2);
      expect((await cli(['stage', '--run', 'true', '--dry-run', '--sysroot', sysroot])).code).toBe(2);
    });
  });
}
