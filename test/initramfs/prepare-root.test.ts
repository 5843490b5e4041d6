/**
 * The real initramfs step, run outside a VM the way ostree tests ostree-prepare-root: in
 * a private mount namespace, with a temp file bound over /proc/cmdline and a tmpfs over
 * /run, against a fake physical root; what it mounted is read back with findmnt. Each
 * case runs under the host's /bin/sh (dash, util-linux mount) and under busybox ash with
 * only busybox applets on PATH (what an initramfs-tools or busybox initramfs has).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa, execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = path.resolve(import.meta.dirname, '../../initramfs/stagedroot-prepare-root');

function why(): string | null {
  if (process.getuid?.() !== 0) return 'not root (mount namespaces and bind mounts need root)';
  try {
    execaSync('unshare', ['-m', '--propagation', 'private', 'true']);
  } catch (err) {
    return `cannot make a mount namespace: ${(err as Error).message.split('\n')[0]}`;
  }
  return null;
}
const NO_NS = why();
if (NO_NS) {
  if (process.env.CI) throw new Error(`the prepare-root tests need root and mount namespaces in CI: ${NO_NS}`);
  console.warn(`SKIPPED the prepare-root namespace tests: ${NO_NS}`);
}
const BUSYBOX = fs.existsSync('/bin/busybox') ? '/bin/busybox' : null;
if (!BUSYBOX) {
  if (process.env.CI) throw new Error('busybox is required in CI (install busybox-static)');
  console.warn('SKIPPED the busybox ash runs of prepare-root: /bin/busybox is not installed');
}

let tmp: string | undefined;
afterEach(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
});

interface Fixture {
  cmdline: string;
  /** Remove the sysroot/ mount point from deployment 0002. */
  noSysrootMountPoint?: boolean;
  /** Break deployment 0002 (current): its tree missing, or a tree that ships a symlink where a mount point goes. */
  breakCurrent?: 'missing' | 'sysroot-link' | 'usr-link' | 'var-link';
  /** The `fallback` and `rollback` links (default: fallback -> 0001, no rollback link); null: none. */
  fallback?: string | null;
  rollback?: string | null;
  tries?: string;
  sharedList?: string;
  /** Remove the shared directory shared/var. */
  noSharedVar?: boolean;
}

/** phys/sr is a sysroot: current -> 0002 (marker "two"), fallback -> 0001 (marker "one"), shared/var; 0003 (marker "three") is a third. */
function fixture(f: Fixture): string {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-prepare-root-'));
  const sr = path.join(tmp, 'phys/sr');
  for (const [id, marker] of [['0001', 'one'], ['0002', 'two'], ['0003', 'three']] as const) {
    const tree = path.join(sr, 'deploy', id, 'tree');
    for (const d of ['usr/bin', 'var', 'srv', 'sysroot', 'etc']) fs.mkdirSync(path.join(tree, d), { recursive: true });
    fs.writeFileSync(path.join(tree, 'marker'), `${marker}\n`);
  }
  if (f.noSysrootMountPoint) fs.rmdirSync(path.join(sr, 'deploy/0002/tree/sysroot'));
  const cur = path.join(sr, 'deploy/0002/tree');
  if (f.breakCurrent === 'missing') fs.rmSync(cur, { recursive: true });
  for (const [kind, dir, target] of [['sysroot-link', 'sysroot', '/'], ['usr-link', 'usr', '/'], ['var-link', 'var', '/']] as const) {
    if (f.breakCurrent !== kind) continue;
    fs.rmSync(path.join(cur, dir), { recursive: true });
    fs.symlinkSync(target, path.join(cur, dir));
  }
  fs.writeFileSync(path.join(sr, 'state.json'), '{}\n');
  fs.symlinkSync('deploy/0002/tree', path.join(sr, 'current'));
  const fallback = f.fallback === undefined ? '0001' : f.fallback;
  if (fallback !== null) fs.symlinkSync(`deploy/${fallback}/tree`, path.join(sr, 'fallback'));
  if (f.rollback) fs.symlinkSync(`deploy/${f.rollback}/tree`, path.join(sr, 'rollback'));
  if (!f.noSharedVar) {
    fs.mkdirSync(path.join(sr, 'shared/var/lib'), { recursive: true });
    fs.writeFileSync(path.join(sr, 'shared/var/lib/kept'), 'machine state\n');
  }
  fs.mkdirSync(path.join(sr, 'shared/srv'), { recursive: true });
  fs.writeFileSync(path.join(sr, 'shared/srv/www'), 'site\n');
  if (f.sharedList !== undefined) fs.writeFileSync(path.join(sr, 'shared.list'), f.sharedList);
  if (f.tries !== undefined) {
    fs.mkdirSync(path.join(sr, 'boot-tries'));
    fs.writeFileSync(path.join(sr, 'boot-tries/0002'), f.tries);
  }
  fs.writeFileSync(path.join(tmp, 'cmdline'), `${f.cmdline}\n`);
  fs.mkdirSync(path.join(tmp, 'out'));
  if (BUSYBOX) {
    fs.mkdirSync(path.join(tmp, 'bb'));
    for (const applet of execaSync(BUSYBOX, ['--list']).stdout.split('\n')) fs.symlinkSync(BUSYBOX, path.join(tmp, 'bb', applet));
  }
  return tmp;
}

interface Run {
  code: number;
  stderr: string;
  /** findmnt of everything under phys after the step: target (relative to phys) and options. */
  mounts: { target: string; ro: boolean }[];
  read: (p: string) => string | null;
  usrWritable: boolean;
  record: string | null;
  /** `ls -a /` of the namespace before and after the step: a bind through a tree's `sysroot -> /` would change it. */
  rootListingBefore: string;
  rootListing: string;
}

/** Runs the step in a fresh mount namespace; everything is unmounted when the namespace ends. */
async function runStep(dir: string, shell: 'sh' | 'busybox', rootSub = '', o: { readOnlyRoot?: boolean } = {}): Promise<Run> {
  const phys = path.join(dir, 'phys', rootSub);
  const out = path.join(dir, 'out');
  const invoke = shell === 'busybox' ? `PATH="${dir}/bb" "${dir}/bb/sh" "${SCRIPT}" "${phys}"` : `sh "${SCRIPT}" "${phys}"`;
  const script = `
set -e
mount --bind "${phys}" "${phys}"
${o.readOnlyRoot ? `mount -o remount,bind,ro "${phys}"` : ''}
mount --bind "${dir}/cmdline" /proc/cmdline
mount -t tmpfs tmpfs /run
ls -a / >"${out}/root-before"
rc=0
( ${invoke} ) 2>"${out}/stderr" || rc=$?
ls -a / >"${out}/root-after"
echo "$rc" >"${out}/rc"
findmnt -R -n -r -o TARGET,OPTIONS "${phys}" >"${out}/mounts"
for f in marker var/lib/kept srv/www sysroot/sr/state.json; do
  if [ -f "${phys}/$f" ]; then cp "${phys}/$f" "${out}/$(echo "$f" | tr / _)"; fi
done
if touch "${phys}/usr/probe" 2>/dev/null; then echo yes >"${out}/usr-writable"; rm -f "${phys}/usr/probe"; fi
for d in var sysroot/sr; do
  if touch "${phys}/$d/probe" 2>/dev/null; then echo yes >"${out}/writable-$(echo "$d" | tr / _)"; rm -f "${phys}/$d/probe"; fi
done
if [ -f /run/stagedroot/booted ]; then cp /run/stagedroot/booted "${out}/record"; fi
`;
  await execa('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script]);
  const read = (p: string): string | null => {
    const f = path.join(out, p.replace(/\//g, '_'));
    return fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : null;
  };
  // By target: findmnt lists a mount's children in mount-ID order, and the kernel hands out
  // IDs system-wide (the lowest free one), so beside the parallel suite's own mounts and
  // unmounts a later bind can take a lower ID (seen once: sysroot before var and usr).
  const mounts = fs
    .readFileSync(path.join(out, 'mounts'), 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [target, options] = l.split(' ');
      return { target: path.relative(phys, target!) || '.', ro: options!.split(',').includes('ro') };
    })
    .sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));
  return { code: Number(read('rc')), stderr: read('stderr') ?? '', mounts, read, usrWritable: read('usr-writable') !== null, record: read('record'), rootListingBefore: read('root-before')!, rootListing: read('root-after')! };
}

const SHELLS = ['sh', 'busybox'] as const;

describe.skipIf(NO_NS !== null)('stagedroot-prepare-root in a mount namespace', () => {
  for (const shell of SHELLS) {
    const itShell = shell === 'busybox' && !BUSYBOX ? it.skip : it;
    describe(shell === 'sh' ? '/bin/sh with util-linux' : 'busybox ash with busybox applets only', () => {
      itShell('mounts the current deployment at the root mount: shared /var bound in, /usr read-only, the physical root at sysroot/', async () => {
        const r = await runStep(fixture({ cmdline: 'root=/dev/vda rw stagedroot=/sr quiet' }), shell);
        expect(r.stderr).toContain('stagedroot: booting deployment 0002');
        expect(r.code).toBe(0);
        expect(r.read('marker')).toBe('two\n');
        expect(r.read('var/lib/kept')).toBe('machine state\n');
        expect(r.read('sysroot/sr/state.json')).toBe('{}\n');
        expect(r.read('srv/www')).toBeNull();
        expect(r.usrWritable).toBe(false);
        expect(r.mounts.filter((m) => m.target !== '.').map((m) => [m.target, m.ro])).toEqual([
          ['sysroot', false],
          ['usr', true],
          ['var', false],
        ]);
        expect(r.record).toBe('id=0002\nsysroot=/sysroot/sr\n');
      });

      // Debian's GRUB passes `ro`: the physical root is mounted read-only, and a bind
      // inherits that per-mount flag. systemd-remount-fs later makes `/` (the tree) and the
      // filesystem writable, but nothing remounts the other binds: /var and /sysroot stayed
      // read-only for the whole boot (EROFS from stagedroot-boot.service, seen in the VM).
      itShell('on a physical root mounted read-only, the shared binds and sysroot/ are writable at the mount level; /usr stays read-only', async () => {
        const r = await runStep(fixture({ cmdline: 'root=/dev/vda ro stagedroot=/sr' }), shell, '', { readOnlyRoot: true });
        expect(r.stderr).toContain('stagedroot: booting deployment 0002');
        expect(r.code).toBe(0);
        // The physical root and the tree bound over it keep the read-only flag: systemd-remount-fs's job.
        expect(r.mounts.filter((m) => m.target === '.').map((m) => m.ro)).toEqual([true, true]);
        expect(r.mounts.filter((m) => m.target !== '.').map((m) => [m.target, m.ro])).toEqual([
          ['sysroot', false],
          ['usr', true],
          ['var', false],
        ]);
        expect(r.read('writable-var')).toBe('yes\n');
        expect(r.read('writable-sysroot_sr')).toBe('yes\n');
        expect(r.usrWritable).toBe(false);
      });

      itShell('uses one boot try of a deployment under assessment, with a rename', async () => {
        const dir = fixture({ cmdline: 'stagedroot=/sr', tries: '2\n' });
        const r = await runStep(dir, shell);
        expect(r.code).toBe(0);
        expect(r.read('marker')).toBe('two\n');
        expect(fs.readFileSync(path.join(dir, 'phys/sr/boot-tries/0002'), 'utf8')).toBe('1\n');
        expect(fs.readdirSync(path.join(dir, 'phys/sr/boot-tries'))).toEqual(['0002']);
        expect(r.record).toBe('id=0002\nsysroot=/sysroot/sr\ntries-left=1\n');
      });

      itShell('boots the fallback when the tries are used up, and records from what', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', tries: '0\n' }), shell);
        expect(r.code).toBe(0);
        expect(r.read('marker')).toBe('one\n');
        expect(r.stderr).toContain('deployment 0002 used all its boot tries without being marked good: booting the last good deployment 0001');
        expect(r.record).toBe('id=0001\nsysroot=/sysroot/sr\nfell-back-from=0002\n');
      });

      itShell('binds every directory shared.list names', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', sharedList: 'var\nsrv\n' }), shell);
        expect(r.code).toBe(0);
        expect(r.read('srv/www')).toBe('site\n');
        expect(r.read('var/lib/kept')).toBe('machine state\n');
      });

      itShell('without stagedroot= on the command line does nothing', async () => {
        const r = await runStep(fixture({ cmdline: 'root=/dev/vda ro' }), shell);
        expect(r.code).toBe(0);
        expect(r.mounts.map((m) => m.target)).toEqual(['.']);
        expect(r.record).toBeNull();
      });

      itShell('a missing sysroot is a clear error, with nothing mounted', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/elsewhere' }), shell);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('stagedroot: error: no stagedroot sysroot at');
        expect(r.stderr).toContain('/phys/elsewhere (no state.json; stagedroot=/elsewhere)');
        expect(r.mounts.map((m) => m.target)).toEqual(['.']);
        expect(r.record).toBeNull();
      });

      itShell('boots the deployment the entry names, with no try of current used, and records it', async () => {
        const dir = fixture({ cmdline: 'root=/dev/vda stagedroot=/sr stagedroot.deployment=0003', tries: '2\n' });
        const r = await runStep(dir, shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.read('marker')).toBe('three\n');
        expect(r.read('var/lib/kept')).toBe('machine state\n');
        expect(fs.readFileSync(path.join(dir, 'phys/sr/boot-tries/0002'), 'utf8')).toBe('2\n');
        expect(r.record).toBe('id=0003\nsysroot=/sysroot/sr\n');
      });

      itShell('counts the tries of the deployment the entry names when it is under assessment', async () => {
        const dir = fixture({ cmdline: 'stagedroot=/sr stagedroot.deployment=0002', tries: '3\n' });
        const r = await runStep(dir, shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.read('marker')).toBe('two\n');
        expect(r.record).toBe('id=0002\nsysroot=/sysroot/sr\ntries-left=2\n');
      });

      itShell('stagedroot=/ records the sysroot at /sysroot', async () => {
        const dir = fixture({ cmdline: 'stagedroot=/' });
        // The sysroot at the physical root itself: phys/sr is the mounted root.
        const r = await runStep(dir, shell, 'sr');
        expect(r.code, r.stderr).toBe(0);
        expect(r.record).toBe('id=0002\nsysroot=/sysroot\n');
      });

      itShell('a current whose tree is missing boots the fallback, with a console message', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', breakCurrent: 'missing' }), shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toMatch(/stagedroot: the current deployment 0002 cannot boot: its tree .*deploy\/0002\/tree is missing/);
        expect(r.stderr).toContain('stagedroot: booting deployment 0001 instead of 0002');
        expect(r.read('marker')).toBe('one\n');
        expect(r.record).toBe('id=0001\nsysroot=/sysroot/sr\nfell-back-from=0002\n');
      });

      itShell('with no fallback, a broken current boots the rollback', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', breakCurrent: 'missing', fallback: null, rollback: '0003' }), shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.read('marker')).toBe('three\n');
        expect(r.record).toBe('id=0003\nsysroot=/sysroot/sr\nfell-back-from=0002\n');
      });

      itShell('a broken fallback is passed over for the rollback', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', tries: '0\n', fallback: '0009', rollback: '0003' }), shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.read('marker')).toBe('three\n');
      });

      itShell('an entry naming a deployment that is gone boots the fallback, saying so', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr stagedroot.deployment=0007' }), shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toContain("the boot entry's deployment 0007 cannot boot");
        expect(r.read('marker')).toBe('one\n');
      });

      for (const kind of ['sysroot-link', 'usr-link'] as const) {
        itShell(`a tree that ships ${kind === 'sysroot-link' ? 'sysroot -> /' : 'usr -> /'} is never bound through the link: the fallback boots`, async () => {
          const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', breakCurrent: kind }), shell);
          expect(r.code, r.stderr).toBe(0);
          expect(r.stderr).toContain('deployment 0002 cannot boot');
          expect(r.read('marker')).toBe('one\n');
          expect(r.mounts.filter((m) => m.target !== '.').map((m) => m.target)).toEqual(['sysroot', 'usr', 'var']);
        });

        itShell(`${kind}: with nothing to fall back to, the boot stops loudly and nothing is mounted`, async () => {
          const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', breakCurrent: kind, fallback: null }), shell);
          expect(r.code).toBe(1);
          expect(r.stderr).toContain('stagedroot: error: no deployment to boot: 0002 is broken');
          expect(r.mounts.map((m) => m.target)).toEqual(['.']);
          expect(r.rootListing).toEqual(r.rootListingBefore);
          expect(r.record).toBeNull();
        });
      }

      itShell('a shared directory whose mount point in the tree is a symlink stops the boot loudly', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', breakCurrent: 'var-link' }), shell);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('stagedroot: error: deployment 0002 has no directory /var to bind its shared directory on (missing, or a symlink)');
        expect(r.mounts.map((m) => m.target)).toEqual(['.']);
        expect(r.rootListing).toEqual(r.rootListingBefore);
      });

      itShell('a shared directory that is missing stops the boot: never without /var', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', noSharedVar: true, sharedList: 'var\n' }), shell);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('stagedroot: error: shared directory');
        expect(r.stderr).toContain('not booting without it');
        expect(r.mounts.map((m) => m.target)).toEqual(['.']);
        expect(r.record).toBeNull();
      });

      itShell('a deployment without the /sysroot mount point is passed over for the fallback', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', noSysrootMountPoint: true }), shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toContain('deployment 0002 cannot boot: it has no directory /sysroot');
        expect(r.read('marker')).toBe('one\n');
      });

      itShell('a tries file that is not a number counts as no tries left: the fallback boots', async () => {
        const r = await runStep(fixture({ cmdline: 'stagedroot=/sr', tries: 'x\n' }), shell);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toContain("holds 'x', not a number of tries: counting it as no tries left");
        expect(r.read('marker')).toBe('one\n');
        expect(r.record).toBe('id=0001\nsysroot=/sysroot/sr\nfell-back-from=0002\n');
      });
    });
  }
});
