// Scenario (a): a plain Debian machine boots through its own bootloader; its admin puts
// it under stagedroot with the commands docs/install.md gives; the next boot goes through
// stagedroot: `/` is the first deployment, `/usr` read-only, `/var` the shared one.
import { POWEROFF, SYSROOT, Scenario, dep } from './scenario.mjs';

/**
 * What the admin types on the running machine to adopt it, in order (docs/install.md; the
 * test reports it); image.mjs's INSTALL_COMMANDS came before. The kernel argument first,
 * so that the first deployment's /etc carries it too; then the adoption.
 */
export const ADOPTION_COMMANDS = {
  bios: [
    `echo 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX stagedroot=/stagedroot"' >>/etc/default/grub`,
    'update-grub',
    'stagedroot adopt --boot-loader grub --boot-dir /boot/grub',
  ],
  uefi: [
    "sed -i 's|$| stagedroot=/stagedroot|' /etc/kernel/cmdline",
    'kernel-install add "$(uname -r)" "/boot/vmlinuz-$(uname -r)" "/boot/initrd.img-$(uname -r)"',
    'stagedroot adopt --boot-loader systemd-boot --boot-dir /boot/efi',
  ],
};

/** The step that runs a machine's ADOPTION_COMMANDS in the guest, reporting each one's exit code and uptime span. */
export function adoptionStep(firmware) {
  return ADOPTION_COMMANDS[firmware]
    .map(
      (c, i) => `cat >/run/adopt-${i}.sh <<'CMD'
${c}
CMD
t0=$(cut -d' ' -f1 /proc/uptime); sh -x /run/adopt-${i}.sh >/run/adopt-${i}.log 2>&1; r adopt-${i} $?; r adopt-${i}-uptime "$t0 to $(cut -d' ' -f1 /proc/uptime)"; cat /run/adopt-${i}.log >/dev/console
`,
    )
    .join('');
}

export async function adoptThroughGrub(env) {
  const s = new Scenario('(a) plain Debian boots through GRUB; adopted as docs/install.md says; the next boot is the deployment', env);
  const a = await s.boot('a-plain-debian', `${adoptionStep('bios')}systemctl --no-block poweroff\n`);
  s.clean(a, 'plain Debian boot');
  s.check(/BOOT_IMAGE=\/boot\/vmlinuz-/.test(a.results.get('cmdline') ?? ''), `GRUB should have booted the kernel (BOOT_IMAGE= on the command line): ${a.results.get('cmdline')}`);
  s.check(/^\/dev\/vda2$/.test(a.results.get('root') ?? ''), `plain Debian's / should be the root partition: ${a.results.get('root')}`);
  s.check(/No such file/.test(a.results.get('record') ?? ''), `plain Debian has no /run/stagedroot/booted: ${a.results.get('record')}`);
  ADOPTION_COMMANDS.bios.forEach((c, i) => s.eq(a.results.get(`adopt-${i}`), '0', `exit code of \`${c}\``));

  const b = await s.boot('a-adopted', `r usr "$(touch /usr/a-probe 2>/dev/null && echo writable || echo read-only)"
r var "$(findmnt -no SOURCE /var)"
r boot-unit "$(systemctl is-active stagedroot-boot.service)"
r health "$(systemctl is-active stagedroot-health.service)"
r status-exit "$(stagedroot status >/dev/null 2>/run/status.err; echo $?) $(cat /run/status.err)"
${POWEROFF}`);
  s.clean(b, 'boot after the adoption');
  s.check(/BOOT_IMAGE=\/stagedroot\/deploy\/0001\/tree\/boot\/vmlinuz-/.test(b.results.get('cmdline') ?? ''), `GRUB should have booted deployment 0001's own kernel (stagedroot.cfg's entry): ${b.results.get('cmdline')}`);
  s.rootIs(b, '0001', 'after the adoption');
  s.needs((b.results.get('cmdline') ?? '').includes('stagedroot.deployment=0001'), 'bootlib: GRUB menu of the deployments', `GRUB should boot deployment 0001's own entry (stagedroot.deployment=0001): ${b.results.get('cmdline')}`);
  s.check((b.results.get('record') ?? '').includes('id=0001'), `/run/stagedroot/booted should name 0001: ${b.results.get('record')}`);
  s.needs((b.results.get('record') ?? '').includes(`sysroot=${SYSROOT} `), 'bootlib: prepare-root records the booted path', `/run/stagedroot/booted should say sysroot=${SYSROOT}: ${b.results.get('record')}`);
  s.eq(b.results.get('usr'), 'read-only', '/usr');
  s.check((b.results.get('var') ?? '').includes('/stagedroot/shared/var'), `/var should be the shared one: ${b.results.get('var')}`);
  s.needs(b.results.get('status-exit')?.startsWith('0 '), 'bootlib: the recorded sysroot= that discovery reads', `\`stagedroot status\` with no sysroot given: ${b.results.get('status-exit')}`);
  s.eq(b.results.get('boot-unit'), 'active', 'stagedroot-boot.service');
  s.eq(b.results.get('health'), 'active', 'stagedroot-health.service');
  s.eq(b.status?.booted, '0001', 'status.booted');
  s.eq(dep(b.status, '0001')?.good, true, 'the adopted deployment marked good');
  return s;
}
