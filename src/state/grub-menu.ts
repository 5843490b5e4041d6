import { entryOptions, entryTitle } from './boot-entry-text.js';
import type { KernelImage } from './boot-entry-text.js';
import type { DeploymentRecord } from './schema.js';

/**
 * stagedroot's own GRUB menu (`stagedroot.cfg` beside grub.cfg) for a GRUB without
 * `blscfg` (Debian, Ubuntu): grub.cfg sources it through /etc/grub.d/09_stagedroot, which
 * `stagedroot install` adds once; each transition rewrites only this file. GRUB reads
 * each deployment's kernel from the deployment's own tree on the physical root, so no
 * copy is made. Pure text.
 */
export const GRUB_MENU_FILE = 'stagedroot.cfg';

/** The id `grub-reboot ID` and `grub-set-default ID` take for a deployment's entry. */
export function grubEntryId(id: string): string {
  return `stagedroot-${id}`;
}

/** A GRUB script word: left bare when it is plain, else single-quoted ('\'' for a quote). */
export function grubWord(w: string): string {
  return /^[A-Za-z0-9_.,:/=+@%-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

export interface GrubMenuEntry {
  deployment: DeploymentRecord;
  kernel: KernelImage;
}

/**
 * The menu, default first. `sysrootOnDisk` is the sysroot's path as GRUB sees the
 * filesystem it is on (the physical root: `/stagedroot`); `sysrootArg` goes into
 * `stagedroot=`. Each entry sets GRUB's root to `$stagedroot_root`, which
 * 09_stagedroot exports (the physical root's device) before it sources this file.
 */
export function grubMenu(entries: readonly GrubMenuEntry[], sysrootOnDisk: string, sysrootArg: string): string {
  const lines = [
    '# stagedroot: the deployments\' boot entries, default first. Rewritten (temp + rename)',
    '# at each transition: do not edit. grub.cfg loads it through /etc/grub.d/09_stagedroot.',
  ];
  for (const { deployment: d, kernel: k } of entries) {
    const tree = `${sysrootOnDisk === '/' ? '' : sysrootOnDisk}/deploy/${d.id}/tree`;
    lines.push(
      `menuentry ${grubWord(entryTitle(d))} --class gnu-linux --class os --id ${grubEntryId(d.id)} {`,
      '\tif [ -n "${stagedroot_root}" ]; then set root="${stagedroot_root}"; fi',
      `\techo ${grubWord(`Loading ${entryTitle(d)}, kernel ${k.version}`)}`,
      `\tlinux ${grubWord(`${tree}/${k.kernelPath}`)} ${entryOptions(d, sysrootArg).map(grubWord).join(' ')}`,
      ...(k.initrdPath === null ? [] : [`\tinitrd ${grubWord(`${tree}/${k.initrdPath}`)}`]),
      '}',
    );
  }
  return lines.join('\n') + '\n';
}
