// Scenario (b): day 2 on the GRUB machine. A package update through `stage --run`
// installs a second kernel (linux-image-amd64, another flavour than the cloud kernel)
// from the package disk; the next boot runs it; the old entry picked for one boot with
// grub-reboot boots the old tree with the old kernel, then the new one is back; a
// rollback makes the old deployment current again.
import { kernel2Version } from './image.mjs';
import { REBOOT, STREAMED_STAGE, Scenario, dep } from './scenario.mjs';

/** The package disk (vdc) where the admin put the kernel's .debs. */
export const MOUNT_PACKAGES = 'mkdir -p /mnt/packages && mount -o ro /dev/vdc /mnt/packages\n';

/** What the admin types to install the kernel (docs/install.md, day 2), with the package disk mounted: --bind lets the command in the new tree see it. */
export const KERNEL_UPDATE_COMMAND = "stagedroot stage --run 'apt-get install -y /mnt/packages/kernel2/*.deb' --bind /mnt/packages";

/** grub-reboot of a deployment's entry: GRUB reads its environment block on the physical root's /boot. */
const grubReboot = (id) => `grub-reboot --boot-directory=/sysroot/boot stagedroot-${id}`;

export async function kernelUpdateThroughGrub(env) {
  const s = new Scenario('(b) a kernel installed by stage --run boots; grub-reboot of the old entry boots the old tree and kernel once; rollback', env);
  const newKernel = kernel2Version(env.us);
  const a = await s.boot('b-stage-kernel', `${MOUNT_PACKAGES}r old-kernel "$(uname -r)"
r stage-started "$(cut -d' ' -f1 /proc/uptime)"
${STREAMED_STAGE(KERNEL_UPDATE_COMMAND)}r stage-ended "$(cut -d' ' -f1 /proc/uptime)"
${REBOOT}`);
  s.clean(a, 'stage boot');
  s.needs(a.results.get('stage-exit') === '0', 'adopt: stage --run', `\`${KERNEL_UPDATE_COMMAND}\` exit code: ${a.results.get('stage-exit')} (see ${a.consoleLog})`);
  const old = a.status?.booted ?? null;
  const oldKernel = a.results.get('old-kernel') ?? null;
  const staged = a.status?.staged ?? null;
  s.check(staged !== null, 'the kernel update left nothing staged');
  if (s.failures.length) return s;

  const b = await s.boot('b-new-kernel', `r dpkg "$(dpkg-query -W -f '\${Status}' linux-image-${newKernel} 2>&1)"
r health "$(systemctl is-active stagedroot-health.service)"
${grubReboot(old)} >/run/grub-reboot.log 2>&1; r grub-reboot $?; cat /run/grub-reboot.log >/dev/console
${REBOOT}`);
  s.clean(b, 'boot after the kernel update');
  s.rootIs(b, staged, 'after the kernel update');
  s.eq(b.results.get('kernel'), newKernel, 'uname -r after the kernel update');
  s.check((b.results.get('cmdline') ?? '').includes(`stagedroot.deployment=${staged}`), `the entry GRUB booted should name deployment ${staged}: ${b.results.get('cmdline')} (the piece: bootlib: GRUB menu)`);
  s.eq(b.results.get('dpkg'), 'install ok installed', `dpkg's record of linux-image-${newKernel} in the new deployment`);
  s.eq(b.results.get('health'), 'active', 'stagedroot-health.service');
  s.eq(b.results.get('grub-reboot'), '0', `\`${grubReboot(old)}\``);

  const c = await s.boot('b-old-entry-once', REBOOT);
  s.clean(c, 'boot of the old entry');
  s.rootIs(c, old, 'the old entry picked with grub-reboot');
  s.eq(c.results.get('kernel'), oldKernel, 'uname -r of the old entry');
  s.eq(c.status?.booted, old, 'status.booted (the old entry)');
  s.eq(c.status?.current, staged, 'status.current (unchanged by a one-time choice)');
  s.eq(dep(c.status, staged)?.good, true, 'the new deployment stays good');

  const d = await s.boot('b-new-again', `stagedroot rollback >/run/rollback.log 2>&1; r rollback $?; cat /run/rollback.log >/dev/console
${REBOOT}`);
  s.clean(d, 'boot after the one-time choice');
  s.rootIs(d, staged, 'the boot after the one-time choice');
  s.eq(d.results.get('kernel'), newKernel, 'uname -r after the one-time choice');
  s.eq(d.results.get('rollback'), '0', '`stagedroot rollback`');

  const e = await s.boot('b-rolled-back', REBOOT.replace('reboot', 'poweroff'));
  s.clean(e, 'boot after the rollback');
  s.rootIs(e, old, 'after the rollback');
  s.eq(e.results.get('kernel'), oldKernel, 'uname -r after the rollback');
  s.eq(e.status?.current, old, 'status.current after the rollback');
  return s;
}
