// Scenario (d): the core checks on a UEFI machine: OVMF boots systemd-boot from the ESP;
// plain Debian first, then adopted; a package update through `stage --run` installs a
// second kernel and boots it; `bootctl set-oneshot` of the old deployment's entry boots
// the old tree with the old kernel once, then the new one is back.
import { ADOPTION_COMMANDS, adoptionStep } from './adopt.mjs';
import { buildMachine, kernel2Version } from './image.mjs';
import { MOUNT_PACKAGES } from './kernel.mjs';
import { POWEROFF, REBOOT, STREAMED_STAGE, Scenario } from './scenario.mjs';

/** The kernel update of the GRUB machine's scenario, and a file of its own (the command's change to /etc). */
const UPDATE_COMMAND = "stagedroot stage --run 'apt-get install -y /mnt/packages/kernel2/*.deb && echo from-the-update >/etc/d-update' --bind /mnt/packages";

// systemd-boot's EFI variables (UTF-16 after 4 bytes of attributes: tr keeps the text).
const EFIVAR = (name) => `/sys/firmware/efi/efivars/${name}-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f`;
/** Which loader booted, and which of its entries (the file name on the ESP). */
const loader = `r loader "$(tr -cd '[:print:]' <${EFIVAR('LoaderInfo')} 2>&1)"
r entry "$(tr -cd '[:print:]' <${EFIVAR('LoaderEntrySelected')} 2>&1)"
`;
/**
 * The ESP entry that boots a deployment, by its file name with `.conf`: systemd-boot 252's
 * entry ids keep the suffix (`bootctl list` shows `id: stagedroot-0001.conf`), and
 * `bootctl set-oneshot stagedroot-0001` exits 0 but matches no entry at boot.
 */
const entryOf = (id) => `$(basename "$(grep -l 'stagedroot.deployment=${id}\\( \\|$\\)' /boot/efi/loader/entries/*.conf | head -n 1)")`;

export async function uefiSystemdBoot(env) {
  const machine = { ...buildMachine({ firmware: 'uefi', us: env.us, work: env.out, tarball: env.tarball, log: env.log }), packages: env.packages };
  env.uefi = machine; // (e) continues on it
  const s = new Scenario('(d) UEFI: OVMF + systemd-boot; adopted; a kernel installed by stage --run boots; bootctl set-oneshot boots the old tree and kernel once', env, machine);
  const newKernel = kernel2Version(env.us);
  const a = await s.boot('d-plain-debian', `${loader}${adoptionStep('uefi')}systemctl --no-block poweroff\n`);
  s.clean(a, 'plain Debian boot');
  s.check((a.results.get('loader') ?? '').includes('systemd-boot'), `systemd-boot should have booted the kernel (LoaderInfo): ${a.results.get('loader')}`);
  ADOPTION_COMMANDS.uefi.forEach((c, i) => s.eq(a.results.get(`adopt-${i}`), '0', `exit code of \`${c}\``));

  const b = await s.boot('d-adopted', `${loader}r entries "$(bootctl list --no-pager 2>&1 | grep -c 'stagedroot.deployment=')"
${MOUNT_PACKAGES}${STREAMED_STAGE(UPDATE_COMMAND)}${REBOOT}`);
  s.clean(b, 'boot after the adoption');
  s.check((b.results.get('loader') ?? '').includes('systemd-boot'), `systemd-boot should have booted the adopted machine: ${b.results.get('loader')}`);
  s.rootIs(b, '0001', 'after the adoption');
  // The default is stagedroot's entry for current, not Debian's own (kernel-install's, sorted first).
  s.eq(b.results.get('entry'), 'stagedroot-0001.conf', 'the entry systemd-boot booted after the adoption (LoaderEntrySelected)');
  s.check((b.results.get('cmdline') ?? '').includes('stagedroot.deployment=0001'), `the kernel command line should name deployment 0001: ${b.results.get('cmdline')}`);
  s.needs(Number(b.results.get('entries') ?? 0) >= 1, 'bootlib: systemd-boot entries on the ESP', `\`bootctl list\` should show an entry naming deployment 0001`);
  s.eq(b.results.get('stage-exit'), '0', `\`${UPDATE_COMMAND}\` exit code`);
  const old = b.status?.booted ?? null;
  const oldKernel = b.results.get('kernel') ?? null;
  const staged = b.status?.staged ?? null;
  if (staged === null) {
    s.check(false, 'the stage left nothing staged');
    return s;
  }

  const c = await s.boot('d-new', `${loader}r update "$(cat /etc/d-update 2>&1)"
r oneshot "$(bootctl set-oneshot "${entryOf(old)}" 2>&1; echo $?)"
${REBOOT}`);
  s.clean(c, 'boot after the update');
  s.rootIs(c, staged, 'after the update');
  s.eq(c.results.get('entry'), `stagedroot-${staged}.conf`, 'the entry systemd-boot booted after the update');
  s.eq(c.results.get('update'), 'from-the-update', "the update's file");
  s.eq(c.results.get('kernel'), newKernel, 'uname -r after the kernel update');
  s.needs(/(^|\n)0$/.test(c.results.get('oneshot') ?? ''), 'bootlib: systemd-boot entries on the ESP', `bootctl set-oneshot of deployment ${old}'s entry: ${c.results.get('oneshot')}`);

  const d = await s.boot('d-old-once', `${loader}${REBOOT}`);
  s.clean(d, 'boot of the one-shot entry');
  s.rootIs(d, old, 'the entry picked with bootctl set-oneshot');
  s.eq(d.results.get('entry'), `stagedroot-${old}.conf`, 'the entry systemd-boot booted once (bootctl set-oneshot)');
  s.eq(d.status?.booted, old, 'status.booted');
  s.eq(d.status?.current, staged, 'status.current (unchanged by a one-time choice)');
  s.eq(d.status?.bootedByChoice, true, 'status.bootedByChoice');
  s.eq(d.results.get('kernel'), oldKernel, 'uname -r of the one-shot entry (the old kernel)');

  const e = await s.boot('d-new-again', `${loader}${POWEROFF}`);
  s.clean(e, 'the boot after the one-shot');
  s.rootIs(e, staged, 'the boot after the one-shot');
  s.eq(e.results.get('entry'), `stagedroot-${staged}.conf`, 'the entry systemd-boot booted after the one-shot');
  s.eq(e.status?.bootedByChoice, false, 'status.bootedByChoice after the one-shot');
  s.eq(e.results.get('kernel'), newKernel, 'uname -r after the one-shot');
  return s;
}
