import type { BaseState, DeploymentRecord } from './schema.js';

/**
 * Boot Loader Specification (Type 1) entries for the deployments that can boot: the
 * current one first (the default), then the rollback. Pure text; the store writes them.
 */
export interface KernelImage {
  /** The kernel version (the name of its usr/lib/modules/ directory). */
  version: string;
  /** sha256 over the kernel and its initramfs: the boot directory keeps one copy per value. */
  hash: string;
  hasInitrd: boolean;
}

export interface BootEntry {
  /** File name in loader/entries/. */
  file: string;
  id: string;
  text: string;
}

/** What gets an entry, default first: current, then the rollback (when it is a different, ready deployment). */
export function bootableDeployments(s: BaseState): DeploymentRecord[] {
  const out: DeploymentRecord[] = [];
  for (const id of [s.current, s.rollback]) {
    const d = s.deployments.find((x) => x.id === id);
    if (d && d.status === 'ready' && !out.includes(d)) out.push(d);
  }
  return out;
}

/** Where a kernel lives in the boot directory (shared by every deployment with the same one). */
export function kernelDir(k: KernelImage): string {
  return `stagedroot/${k.hash}`;
}

/**
 * One entry. `version` orders them for GRUB's blscfg and systemd-boot alike (highest
 * first, the default): the current deployment gets the highest.
 */
export function bootEntry(d: DeploymentRecord, k: KernelImage, rank: number): BootEntry {
  const dir = kernelDir(k);
  const lines = [
    `title ${d.label} (stagedroot ${d.id})`,
    `version ${rank}`,
    `sort-key stagedroot`,
    `options ${(d.kernelArguments ?? []).join(' ')}`.trimEnd(),
    `linux /${dir}/vmlinuz-${k.version}`,
    ...(k.hasInitrd ? [`initrd /${dir}/initramfs-${k.version}.img`] : []),
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
