import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the package's shipped files are (units/, initramfs/), from this module's place in dist/ or src/. */
export function packageDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
}

/** What `stagedroot install` copies from the package into a root, and where (paths in the root). */
export const INITRAMFS_FILES: readonly { from: string; to: string; mode: number }[] = [
  { from: 'initramfs/stagedroot-prepare-root', to: '/usr/lib/stagedroot/stagedroot-prepare-root', mode: 0o755 },
  { from: 'initramfs/dracut/module-setup.sh', to: '/usr/lib/dracut/modules.d/50stagedroot/module-setup.sh', mode: 0o755 },
  { from: 'initramfs/dracut/pre-pivot.sh', to: '/usr/lib/dracut/modules.d/50stagedroot/pre-pivot.sh', mode: 0o755 },
  { from: 'initramfs/stagedroot-prepare-root.service', to: '/usr/lib/dracut/modules.d/50stagedroot/stagedroot-prepare-root.service', mode: 0o644 },
  { from: 'initramfs/initramfs-tools/hook', to: '/usr/share/initramfs-tools/hooks/stagedroot', mode: 0o755 },
  { from: 'initramfs/initramfs-tools/local-bottom', to: '/usr/share/initramfs-tools/scripts/local-bottom/stagedroot', mode: 0o755 },
  // GRUB without blscfg: grub.cfg loads stagedroot's own menu (update-grub once; harmless where stagedroot.cfg is absent).
  { from: 'initramfs/grub/09_stagedroot', to: '/etc/grub.d/09_stagedroot', mode: 0o755 },
];

export const UNIT_NAMES = ['stagedroot-boot.service', 'stagedroot-detach-usr.service', 'stagedroot-finalize.service', 'stagedroot-health.service'] as const;

/** Drop-ins for the distribution's own units (paths in the root): see each file's comment. */
export const DROPIN_FILES: readonly { from: string; to: string; mode: number }[] = [
  { from: 'units/systemd-journal-flush.service.d/stagedroot.conf', to: '/etc/systemd/system/systemd-journal-flush.service.d/50-stagedroot.conf', mode: 0o644 },
];
