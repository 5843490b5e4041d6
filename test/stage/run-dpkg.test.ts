/**
 * `stage --run` with the real dpkg: `dpkg -i` of a package built here with `dpkg-deb
 * --build` (a file under /usr, a conffile under /etc, a postinst), in the namespace, in
 * a small tree made of a static busybox and the host's own dpkg with its libraries.
 * The package, its conffile record and what its postinst did are in the new deployment,
 * and a rollback boots the tree and records without them.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa, execaSync } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adoptRoot } from '../../src/install/adopt.js';
import { Sysroot } from '../../src/sysroot.js';
import { buildTree } from '../../src/testing/index.js';
import { busyboxMachine, WHY_NO_RUN } from '../helpers/busybox-machine.js';
import { cli } from '../helpers/cli.js';
import { unavailable } from '../helpers/mounts.js';

/** The host's dpkg and GNU tar (dpkg-deb extracts through it, with options busybox's tar lacks). */
const DPKG_TOOLS = ['/usr/bin/dpkg', '/usr/bin/dpkg-deb', '/usr/bin/dpkg-query', '/usr/bin/dpkg-split', '/usr/bin/tar'];
/** What dpkg looks for in PATH before it runs (help.c's checkpath) and what the postinst uses, from busybox. */
const MORE_APPLETS = ['[', 'diff', 'start-stop-daemon', 'md5sum', 'mv', 'chmod'];

const why =
  WHY_NO_RUN ??
  (DPKG_TOOLS.every((t) => fs.existsSync(t)) ? null : 'no dpkg on this host (a Debian host is needed to copy it into the test tree)') ??
  (((): string | null => {
    try {
      execaSync('ldd', ['--version']);
      return null;
    } catch {
      return 'no ldd (libc-bin)';
    }
  })());

/** The shared libraries a binary loads, with the dynamic loader (ldd's paths, symlinks resolved when copied). */
function libraries(bin: string): string[] {
  return execaSync('ldd', [bin])
    .stdout.split('\n')
    .map((l) => /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(l)?.[1])
    .filter((p): p is string => p !== undefined);
}

/** The host's dpkg tools and tar with their libraries, into a merged-/usr busybox tree. */
function addDpkg(root: string): void {
  fs.symlinkSync('usr/lib', path.join(root, 'lib'));
  fs.mkdirSync(path.join(root, 'usr/lib64'), { recursive: true });
  fs.symlinkSync('usr/lib64', path.join(root, 'lib64'));
  for (const tool of DPKG_TOOLS) {
    fs.copyFileSync(tool, path.join(root, 'usr/bin', path.basename(tool)));
    for (const lib of libraries(tool)) {
      const rel = lib.replace(/^\/(usr\/)?/, 'usr/');
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      if (!fs.existsSync(path.join(root, rel))) fs.copyFileSync(lib, path.join(root, rel));
    }
  }
  for (const a of MORE_APPLETS) if (!fs.existsSync(path.join(root, 'usr/bin', a))) fs.symlinkSync('busybox', path.join(root, 'usr/bin', a));
  buildTree(root, {
    'usr/sbin/ldconfig': { content: '#!/bin/sh\nexit 0\n', mode: 0o755 },
    'var/lib/dpkg/info/': { dir: true },
    'var/lib/dpkg/updates/': { dir: true },
    'var/lib/dpkg/triggers/': { dir: true },
    'var/lib/dpkg/alternatives/': { dir: true },
    'var/lib/dpkg/available': '',
    'etc/dpkg/dpkg.cfg.d/': { dir: true },
  });
}

/** A package with a file under /usr, one under /var, a conffile and a postinst that records it ran, built with dpkg-deb. */
async function buildDeb(dir: string, out: string): Promise<void> {
  buildTree(dir, {
    'DEBIAN/control': 'Package: hello-stagedroot\nVersion: 1.0\nArchitecture: all\nMaintainer: test <test@example.org>\nDescription: a test package\n',
    'DEBIAN/conffiles': '/etc/hello.conf\n',
    'DEBIAN/postinst': { content: '#!/bin/sh\nset -e\nif [ "$1" = configure ]; then echo "configured $2" > /etc/hello.postinst-ran; fi\n', mode: 0o755 },
    'etc/hello.conf': 'greeting=hello\n',
    'usr/share/hello-stagedroot/README': 'hello\n',
    'var/lib/hello-stagedroot/seed': 'seed\n',
  });
  fs.chmodSync(path.join(dir, 'DEBIAN'), 0o755);
  await execa('dpkg-deb', ['--root-owner-group', '-Zgzip', '--build', dir, out]);
}

if (why !== null) {
  if (process.env.CI) throw new Error(`the dpkg stage --run test needs ${why}`);
  describe('stage --run with dpkg', () => unavailable(why));
} else {
  describe('stage --run: a real dpkg -i in the new tree', () => {
    let base: string;
    let sysroot: string;
    beforeAll(async () => {
      base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-dpkg-'));
      const root = path.join(base, 'root');
      busyboxMachine(root, { 'var/lib/dpkg/status': 'Package: base\nStatus: install ok installed\nPriority: required\nVersion: 1\nArchitecture: all\nMaintainer: test <test@example.org>\nDescription: the base\n\n' });
      addDpkg(root);
      fs.mkdirSync(path.join(root, 'usr/share/test-debs'), { recursive: true });
      await buildDeb(path.join(base, 'pkg'), path.join(root, 'usr/share/test-debs/hello.deb'));
      sysroot = path.join(root, 'stagedroot');
      await adoptRoot({ root });
    });
    afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

    const tree = (id: string, p: string) => path.join(sysroot, 'deploy', id, 'tree', p);
    // By path: Debian's static busybox runs its own applet for a bare `dpkg` (a shell that prefers applets).
    const status = (id: string) => fs.readFileSync(tree(id, 'usr/lib/sysimage/dpkg/status'), 'utf8');

    it('the package, its conffile and its postinst travel with the deployment, and not with a rollback', async () => {
      const r = await cli(['stage', '--run', '/usr/bin/dpkg -i /usr/share/test-debs/hello.deb && /usr/bin/dpkg-query -W -f "\\${Package} \\${Version} \\${db:Status-Abbrev}\\n" hello-stagedroot', '--sysroot', sysroot, '--no-verify-units']);
      expect(r.code, r.err).toBe(0);
      expect(r.err).toMatch(/hello-stagedroot 1\.0 ii/);
      const s = await Sysroot.open(sysroot);
      const id = s.status().staged!;
      // In the new tree: the files, the conffile's record (path and md5) and what the postinst did.
      expect(fs.readFileSync(tree(id, 'usr/share/hello-stagedroot/README'), 'utf8')).toBe('hello\n');
      expect(fs.readFileSync(tree(id, 'etc/hello.conf'), 'utf8')).toBe('greeting=hello\n');
      expect(fs.readFileSync(tree(id, 'etc/hello.postinst-ran'), 'utf8')).toBe('configured \n');
      expect(status(id)).toMatch(/Package: hello-stagedroot\nStatus: install ok installed\n[\s\S]*Conffiles:\n \/etc\/hello\.conf [0-9a-f]{32}\n/);
      expect(fs.readFileSync(tree(id, 'usr/lib/sysimage/dpkg/info/hello-stagedroot.list'), 'utf8')).toContain('/etc/hello.conf\n');
      // The booted deployment is as it was.
      expect(status('0001')).not.toContain('hello-stagedroot');
      expect(fs.existsSync(tree('0001', 'etc/hello.conf'))).toBe(false);
      // The shared /var holds only the link: dpkg's records did not land there.
      expect(fs.readlinkSync(path.join(sysroot, 'shared/var/lib/dpkg'))).toBe('/usr/lib/sysimage/dpkg');

      await s.finalize();
      // What the package ships under /var is the shared /var's initial content, added by finalize.
      expect(fs.readFileSync(path.join(sysroot, 'shared/var/lib/hello-stagedroot/seed'), 'utf8')).toBe('seed\n');
      await s.boot({ runDir: path.join(base, 'no-run') });
      await s.markGood();
      const back = await s.rollback();
      expect(back.current).toBe('0001');
      expect(status(back.current)).not.toContain('hello-stagedroot');
      expect(fs.existsSync(tree(back.current, 'etc/hello.conf'))).toBe(false);
      expect(fs.existsSync(tree(back.current, 'usr/share/hello-stagedroot'))).toBe(false);
    });
  });
}
