/**
 * The shipped systemd units, rendered for one host: the CLI path that exists there and
 * the sysroot that is configured. Pure text in, text out.
 *
 * The templates in the package's units/ say `/usr/bin/stagedroot` and `/sysroot`; a
 * rendered unit names the real ones in ExecStart=/ExecStop=, Environment= and
 * RequiresMountsFor=. No unit carries a ConditionPathExists= on the sysroot: a missing or
 * wrong sysroot makes `stagedroot boot` fail at boot (and `finalize` at shutdown), loudly
 * in the journal and in `systemctl --failed`, instead of a unit skipped in silence and
 * updates that never apply.
 */
export interface UnitTarget {
  /** Absolute path of the stagedroot CLI on the host. */
  cli: string;
  /** Absolute path of the sysroot on the running host. */
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
    } else if (key === 'Environment' && value === `STAGEDROOT_SYSROOT=${TEMPLATE_SYSROOT}`) {
      out.push(`Environment=STAGEDROOT_SYSROOT=${t.sysroot}`);
    } else if (key === 'RequiresMountsFor' && value === TEMPLATE_SYSROOT) {
      out.push(`RequiresMountsFor=${t.sysroot}`);
    } else {
      out.push(line);
    }
  }
  return out.join('\n');
}

/** /etc/stagedroot/environment: the one place the sysroot is configured (every unit reads it). */
export function environmentFile(t: UnitTarget): string {
  return `# Written by \`stagedroot install\`: the sysroot the stagedroot units use.\nSTAGEDROOT_SYSROOT=${t.sysroot}\n`;
}
