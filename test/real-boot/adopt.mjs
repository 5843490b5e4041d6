// Scenario (a): a plain Debian machine boots through its own bootloader; its admin puts
// it under stagedroot with the commands docs/install.md gives; the next boot goes through
// stagedroot: `/` is the first deployment, `/usr` read-only, `/var` the shared one.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inMachine, withDisk, withEsp } from './image.mjs';
import { POWEROFF, SYSROOT, Scenario, dep } from './scenario.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const CLI = path.resolve(HERE, '../../dist/cli/main.js');

/**
 * What the admin types on the running machine to adopt it, in order (the test reports
 * it); image.mjs's INSTALL_COMMANDS came before. Empty until `stagedroot adopt` is on
 * main: temporaryOfflineAdoption stands in for it.
 */
export const ADOPTION_COMMANDS = [];

function run(cmd, args) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 }).toString();
}

/**
 * TEMPORARY, until `stagedroot adopt` is on main: the adoption done from outside the
 * machine (powered off), the way the first users did it: a copy of the root made the
 * first deployment with `stagedroot init` into /stagedroot, and stagedroot=/stagedroot
 * added to GRUB's kernel command line with update-grub. Replaced by the guest running
 * `stagedroot adopt` in ADOPTION_COMMANDS.
 */
export function temporaryOfflineAdoption(machine, work) {
  withDisk(machine.img, (a, dev) => {
    const root = path.join(work, 'adopt.mnt');
    a.mount([`${dev}p2`], root);
    a.api(root, dev);
    const copy = path.join(work, 'adopt.copy');
    fs.rmSync(copy, { recursive: true, force: true });
    fs.mkdirSync(copy);
    run('tar', ['-C', root, '--one-file-system', '--exclude=./lost+found', '-cf', path.join(work, 'adopt.tar'), '.']);
    run('tar', ['-C', copy, '-xpf', path.join(work, 'adopt.tar'), '--xattrs', '--acls']);
    fs.rmSync(path.join(work, 'adopt.tar'));
    fs.mkdirSync(path.join(copy, 'sysroot'), { recursive: true });
    run('node', [CLI, 'init', '--sysroot', path.join(root, 'stagedroot'), '--from', copy, '--label', 'adopted']);
    fs.rmSync(copy, { recursive: true, force: true });
    const tree = path.join(root, 'stagedroot/deploy/0001/tree');
    if (machine.firmware === 'bios') {
      const line = '\n# stagedroot (temporary test adoption)\nGRUB_CMDLINE_LINUX="stagedroot=/stagedroot"\n';
      fs.appendFileSync(path.join(root, 'etc/default/grub'), line);
      fs.appendFileSync(path.join(tree, 'etc/default/grub'), line);
      run('chroot', [root, 'update-grub']);
    } else {
      const cmdline = `${fs.readFileSync(path.join(root, 'etc/kernel/cmdline'), 'utf8').trim()} stagedroot=/stagedroot\n`;
      fs.writeFileSync(path.join(root, 'etc/kernel/cmdline'), cmdline);
      fs.writeFileSync(path.join(tree, 'etc/kernel/cmdline'), cmdline);
      withEsp(`${dev}p1`, root, () => inMachine(root, 'kernel-install', ['add', machine.kernel, `/boot/vmlinuz-${machine.kernel}`, `/boot/initrd.img-${machine.kernel}`]));
    }
  });
}

/** The step that runs ADOPTION_COMMANDS in the guest, reporting each one's exit code and uptime span. */
export function adoptionStep() {
  return ADOPTION_COMMANDS.map((c, i) => `t0=$(cut -d' ' -f1 /proc/uptime); echo "+ ${c}" >/dev/console; ${c} >/run/adopt-${i}.log 2>&1; r adopt-${i} $?; r adopt-${i}-uptime "$t0 to $(cut -d' ' -f1 /proc/uptime)"; cat /run/adopt-${i}.log >/dev/console\n`).join('');
}

export async function adoptThroughGrub(env) {
  const s = new Scenario('(a) plain Debian boots through GRUB; adopted as docs/install.md says; the next boot is the deployment', env);
  const a = await s.boot('a-plain-debian', `${adoptionStep()}systemctl --no-block poweroff\n`);
  s.clean(a, 'plain Debian boot');
  s.check(/BOOT_IMAGE=\/boot\/vmlinuz-/.test(a.results.get('cmdline') ?? ''), `GRUB should have booted the kernel (BOOT_IMAGE= on the command line): ${a.results.get('cmdline')}`);
  s.check(/^\/dev\/vda2$/.test(a.results.get('root') ?? ''), `plain Debian's / should be the root partition: ${a.results.get('root')}`);
  s.check(/No such file/.test(a.results.get('record') ?? ''), `plain Debian has no /run/stagedroot/booted: ${a.results.get('record')}`);
  ADOPTION_COMMANDS.forEach((c, i) => s.eq(a.results.get(`adopt-${i}`), '0', `exit code of \`${c}\``));

  if (ADOPTION_COMMANDS.length === 0) {
    temporaryOfflineAdoption(s.machine, env.out);
    s.notes.push('TEMPORARY: adopted offline with `stagedroot init` from a copy and update-grub (`stagedroot adopt` is not on main yet)');
  }

  const b = await s.boot('a-adopted', `r usr "$(touch /usr/a-probe 2>/dev/null && echo writable || echo read-only)"
r var "$(findmnt -no SOURCE /var)"
r boot-unit "$(systemctl is-active stagedroot-boot.service)"
r health "$(systemctl is-active stagedroot-health.service)"
r status-exit "$(stagedroot status >/dev/null 2>/run/status.err; echo $?) $(cat /run/status.err)"
${POWEROFF}`);
  s.clean(b, 'boot after the adoption');
  s.check(/BOOT_IMAGE=\/boot\/vmlinuz-/.test(b.results.get('cmdline') ?? ''), `GRUB should have booted the kernel: ${b.results.get('cmdline')}`);
  s.rootIs(b, '0001', 'after the adoption');
  s.check((b.results.get('record') ?? '').includes('id=0001'), `/run/stagedroot/booted should name 0001: ${b.results.get('record')}`);
  s.needs((b.results.get('record') ?? '').includes(`sysroot=${SYSROOT} `), 'bootlib: prepare-root records the booted path', `/run/stagedroot/booted should say sysroot=${SYSROOT}: ${b.results.get('record')}`);
  s.eq(b.results.get('usr'), 'read-only', '/usr');
  s.check((b.results.get('var') ?? '').includes('/stagedroot/shared/var'), `/var should be the shared one: ${b.results.get('var')}`);
  s.needs(b.results.get('status-exit')?.startsWith('0 '), 'adopt: sysroot discovery', `\`stagedroot status\` with no sysroot given: ${b.results.get('status-exit')}`);
  s.eq(b.results.get('boot-unit'), 'active', 'stagedroot-boot.service');
  s.eq(b.results.get('health'), 'active', 'stagedroot-health.service');
  s.eq(b.status?.booted, '0001', 'status.booted');
  s.eq(dep(b.status, '0001')?.good, true, 'the adopted deployment marked good');
  return s;
}
