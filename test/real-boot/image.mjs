// Builds the real-boot test's disk image the way the README tells a user to set up a
// machine: a Debian userspace with node, stagedroot installed with `npm install -g`
// and `stagedroot install`, a sysroot made from it with `stagedroot init`, and the
// kernel argument stagedroot=/ (the sysroot is the root of the physical filesystem,
// seen at /sysroot by the running system). Only the test's own step unit and health
// check are added by hand.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '../..');

function run(cmd, args, o = {}) {
  return (execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20, ...o }) ?? '').toString();
}

/** The newest Debian cloud kernel installed on this machine (linux-image-cloud-amd64). */
export function findKernel() {
  const versions = fs.readdirSync('/usr/lib/modules').filter((v) => v.endsWith('-cloud-amd64') && fs.existsSync(`/boot/vmlinuz-${v}`));
  versions.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const v = versions.at(-1);
  if (!v) throw new Error('no linux-image-cloud-amd64 kernel in /boot (apt-get install linux-image-cloud-amd64)');
  return { version: v, vmlinuz: `/boot/vmlinuz-${v}` };
}

const STEP_UNIT = `[Unit]
Description=stagedroot real-boot test: this boot's step (the script on /dev/vdb)
After=multi-user.target stagedroot-health.service stagedroot-boot.service

[Service]
Type=oneshot
StandardOutput=journal+console
ExecStart=/bin/sh -c 'tr -d "\\\\000" </dev/vdb >/run/step.sh && exec /bin/sh /run/step.sh >/dev/ttyS1 2>&1'

[Install]
WantedBy=multi-user.target
`;

/** A required health check that passes when prepare-root made the root (the record exists). */
const HEALTH_CHECK = `#!/bin/sh
test -f /run/stagedroot/booted
`;

export function buildImage({ cache, work, log }) {
  const userspace = path.join(cache, 'userspace');
  const t0 = Date.now();
  run('sh', [path.join(HERE, 'build-userspace.sh'), cache], { stdio: ['ignore', 'inherit', 'inherit'] });
  log(`userspace ready (${((Date.now() - t0) / 1000).toFixed(1)}s)`);

  const prep = path.join(work, 'prep');
  run('cp', ['-a', '--reflink=auto', userspace, prep]);
  fs.rmSync(path.join(prep, '.complete'));
  fs.writeFileSync(path.join(prep, 'etc/hostname'), 'stagedroot-vm\n');
  // node and the package, as a user installs them.
  fs.copyFileSync(process.execPath, path.join(prep, 'usr/bin/node'));
  fs.chmodSync(path.join(prep, 'usr/bin/node'), 0o755);
  const packDir = path.join(work, 'pack');
  fs.mkdirSync(packDir);
  const tarball = path.join(packDir, run('npm', ['pack', '--silent', '--pack-destination', packDir], { cwd: REPO }).trim().split('\n').at(-1));
  const t1 = Date.now();
  run('npm', ['install', '-g', '--prefix', path.join(prep, 'usr/local'), '--no-audit', '--no-fund', '--omit=dev', tarball]);
  log(`npm install -g (${((Date.now() - t1) / 1000).toFixed(1)}s)`);
  // `stagedroot install`, run inside the userspace as its own admin would.
  const out = run('chroot', [prep, '/usr/local/bin/stagedroot', 'install', '--sysroot', '/sysroot'], { env: { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin', LANG: 'C.UTF-8' } });
  log(`stagedroot install: ${out.trim().split('\n').length} lines`);
  // The test's own instrumentation.
  fs.writeFileSync(path.join(prep, 'etc/systemd/system/stagedroot-test-step.service'), STEP_UNIT);
  fs.mkdirSync(path.join(prep, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
  fs.symlinkSync('../stagedroot-test-step.service', path.join(prep, 'etc/systemd/system/multi-user.target.wants/stagedroot-test-step.service'));
  fs.mkdirSync(path.join(prep, 'etc/stagedroot/health/required.d'), { recursive: true });
  fs.writeFileSync(path.join(prep, 'etc/stagedroot/health/required.d/10-prepare-root-ran'), HEALTH_CHECK, { mode: 0o755 });

  // /var is machine state: one copy in the sysroot (<sysroot>/shared/var), bound over
  // every deployment's empty /var by prepare-root; /sysroot is the physical root's mount point.
  const varDir = path.join(work, 'var');
  fs.renameSync(path.join(prep, 'var'), varDir);
  fs.mkdirSync(path.join(prep, 'var'));
  fs.mkdirSync(path.join(prep, 'sysroot'), { recursive: true });
  const sysroot = path.join(work, 'disk');
  run('node', [path.join(REPO, 'dist/cli/main.js'), 'init', '--sysroot', sysroot, '--from', prep, '--label', 'base']);
  placeSharedVar(sysroot, varDir);
  const img = path.join(work, 'disk.img');
  run('mkfs.ext4', ['-q', '-F', '-L', 'stagedroot', '-d', sysroot, img, '4G']);
  const kernel = findKernel();
  const initrd = path.join(work, 'initrd.img');
  const prepareRoot = path.join(sysroot, 'deploy/0001/tree/usr/lib/stagedroot/stagedroot-prepare-root');
  run('sh', [path.join(HERE, 'make-initramfs.sh'), kernel.version, prepareRoot, initrd]);
  fs.rmSync(prep, { recursive: true, force: true });
  fs.rmSync(sysroot, { recursive: true, force: true });
  log(`image built (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
  return { img, initrd, kernel };
}

/** The userspace's /var becomes the sysroot's shared /var (init makes it empty, or not at all). */
function placeSharedVar(sysroot, varDir) {
  const shared = path.join(sysroot, 'shared/var');
  if (fs.existsSync(shared)) {
    if (fs.readdirSync(shared).length > 0) throw new Error(`${shared} is not empty after init`);
    fs.rmdirSync(shared);
  }
  fs.mkdirSync(path.dirname(shared), { recursive: true });
  fs.renameSync(varDir, shared);
}
