import type { BaseState, DeploymentRecord } from './schema.js';

/**
 * Boot entries for the deployments that can boot, the current one first (the default),
 * then the rollback. Each names its deployment on its kernel command line
 * (`stagedroot.deployment=ID`, as ostree's `ostree=`), so that whichever entry the
 * bootloader or a person picks, prepare-root boots that deployment with its own kernel.
 * Pure text; the store writes them in the form the machine's bootloader reads.
 */
export interface KernelImage {
  /** The kernel version (Debian: the suffix of boot/vmlinuz-V; else the name of usr/lib/modules/V/). */
  version: string;
  /** sha256 over the kernel and its initramfs: a boot directory keeps one copy per value. */
  hash: string;
  /** Where the kernel and its initramfs are inside the deployment's tree (tree-relative). */
  kernelPath: string;
  initrdPath: string | null;
}

export interface BootEntry {
  /** File name in loader/entries/. */
  file: string;
  id: string;
  text: string;
}

/** The kernel argument that names the deployment an entry boots. */
export const DEPLOYMENT_ARG = 'stagedroot.deployment';

/** What gets an entry, default first: current, then the rollback (when it is a different, ready deployment). */
export function bootableDeployments(s: BaseState): DeploymentRecord[] {
  const out: DeploymentRecord[] = [];
  for (const id of [s.current, s.rollback]) {
    const d = s.deployments.find((x) => x.id === id);
    if (d && d.status === 'ready' && !out.includes(d)) out.push(d);
  }
  return out;
}

/** Where a kernel lives in a boot directory it is copied into (shared by every deployment with the same one). */
export function kernelDir(k: KernelImage): string {
  return `stagedroot/${k.hash}`;
}

/** The file names of a kernel copied into a boot directory (under kernelDir). */
export function copiedNames(k: KernelImage): { kernel: string; initrd: string | null } {
  return { kernel: `vmlinuz-${k.version}`, initrd: k.initrdPath === null ? null : `initramfs-${k.version}.img` };
}

/**
 * An entry's kernel command line: the deployment's own arguments, `stagedroot=` (the
 * sysroot's path on the physical root) unless they carry one, then the deployment it boots.
 */
export function entryOptions(d: DeploymentRecord, sysrootArg: string): string[] {
  const args = (d.kernelArguments ?? []).filter((a) => !a.startsWith(`${DEPLOYMENT_ARG}=`));
  if (!carriesSysroot(d)) args.push(`stagedroot=${sysrootArg}`);
  return [...args, `${DEPLOYMENT_ARG}=${d.id}`];
}

/** True when the deployment's own arguments say where the sysroot is (its entries do not need the sysroot's path). */
export function carriesSysroot(d: DeploymentRecord): boolean {
  return (d.kernelArguments ?? []).some((a) => a.startsWith('stagedroot='));
}

/** The deployment an entry's options name, or null. */
export function entryDeployment(options: string): string | null {
  let id: string | null = null;
  for (const w of options.split(/\s+/)) if (w.startsWith(`${DEPLOYMENT_ARG}=`)) id = w.slice(DEPLOYMENT_ARG.length + 1);
  return id;
}

export function entryTitle(d: DeploymentRecord): string {
  return `${d.label} (stagedroot ${d.id})`;
}

/**
 * One Boot Loader Specification (Type 1) entry, for a kernel copied into the boot
 * directory. `version` orders them for GRUB's blscfg and systemd-boot alike (highest
 * first, the default).
 */
export function bootEntry(d: DeploymentRecord, k: KernelImage, version: number, sysrootArg: string): BootEntry {
  const dir = kernelDir(k);
  const names = copiedNames(k);
  const lines = [
    `title ${entryTitle(d)}`,
    `version ${version}`,
    `sort-key stagedroot`,
    `options ${entryOptions(d, sysrootArg).join(' ')}`,
    `linux /${dir}/${names.kernel}`,
    ...(names.initrd === null ? [] : [`initrd /${dir}/${names.initrd}`]),
  ];
  return { file: `stagedroot-${d.id}.conf`, id: d.id, text: lines.join('\n') + '\n' };
}

/** A BLS entry's keys (the first value of each), for checks and for reading entries back. */
export function parseBootEntry(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z-]+)(?:[ \t]+(.*))?$/.exec(line.trim());
    if (m && !(m[1]! in out)) out[m[1]!] = m[2] ?? '';
  }
  return out;
}
