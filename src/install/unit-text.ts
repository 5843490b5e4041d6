/**
 * The shipped systemd units, rendered for one host: the CLI path that exists there. Pure
 * text in, text out.
 *
 * The templates in the package's units/ say `/usr/bin/stagedroot`; a rendered unit names
 * the real one in ExecStart=/ExecStop=. No unit names the sysroot: the CLI finds it
 * (/run/stagedroot/booted on a machine booted through stagedroot, else
 * /etc/stagedroot/environment), so the path the initramfs booted and the path the units
 * use cannot disagree. No unit carries a ConditionPathExists= on the sysroot either: a
 * missing or wrong one makes `stagedroot boot` fail at boot (and `finalize` at
 * shutdown), loudly in the journal and in `systemctl --failed`, instead of a unit skipped
 * in silence and updates that never apply.
 */
export interface UnitTarget {
  /** Absolute path of the stagedroot CLI on the host. */
  cli: string;
  /** Absolute path of the sysroot on the running host (for /etc/stagedroot/environment only). */
  sysroot: string;
}

export const TEMPLATE_CLI = '/usr/bin/stagedroot';
export const TEMPLATE_SYSROOT = '/sysroot';

export function renderUnit(template: string, t: UnitTarget): string {
  const out: string[] = [];
  for (const line of template.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (!m) {
      out.push(line);
      continue;
    }
    const [, key, value] = m as unknown as [string, string, string];
    if (key === 'ConditionPathExists' && value.startsWith(TEMPLATE_SYSROOT)) continue;
    if ((key === 'ExecStart' || key === 'ExecStop') && value.startsWith(`${TEMPLATE_CLI} `)) {
      out.push(`${key}=${t.cli}${value.slice(TEMPLATE_CLI.length)}`);
    } else {
      out.push(line);
    }
  }
  return out.join('\n');
}

/**
 * /etc/stagedroot/environment: where the sysroot is on a machine not booted through
 * stagedroot (yet). Once it is, the initramfs's record (/run/stagedroot/booted) comes first.
 */
export function environmentFile(t: UnitTarget): string {
  return `# Written by stagedroot: the sysroot's path when this machine is not booted through stagedroot.\n# Booted through it, the CLI reads sysroot= in /run/stagedroot/booted first.\nSTAGEDROOT_SYSROOT=${t.sysroot}\n`;
}
