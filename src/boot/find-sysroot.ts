import * as path from 'node:path';
import { StagedrootError } from '../errors.js';
import { readText } from '../fs/core/host-paths.js';

/**
 * Where a machine keeps what says which sysroot it uses: the initramfs's record
 * (`RUN_DIR/booted`, `sysroot=`) and the file `stagedroot install` writes
 * (`ETC_DIR/environment`, `STAGEDROOT_SYSROOT=`). Tests point them at temp dirs.
 */
export interface SysrootPlaces {
  /** Default /run/stagedroot. */
  runDir?: string;
  /** Default /etc/stagedroot. */
  etcDir?: string;
}

export type SysrootFrom = 'option' | 'environment' | 'boot-record' | 'environment-file';

export interface FoundSysroot {
  path: string;
  /** Which of the four places gave it. */
  from: SysrootFrom;
}

/** `key=value` lines (systemd EnvironmentFile syntax: `#` comments, optional quotes). */
export function parseKeyValues(text: string): Map<string, string> {
  const kv = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_-]*)=(.*)$/.exec(line);
    if (!m) continue;
    let v = m[2]!.trim();
    if (v.length >= 2 && (v[0] === '"' || v[0] === "'") && v.endsWith(v[0]!)) v = v.slice(1, -1);
    kv.set(m[1]!, v);
  }
  return kv;
}

function usable(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

/**
 * The sysroot a CLI verb works on, from the first of: `--sysroot`, `$STAGEDROOT_SYSROOT`,
 * the `sysroot=` that prepare-root recorded in /run/stagedroot/booted (where the booted
 * system sees it: /sysroot/stagedroot when the kernel said stagedroot=/stagedroot), and
 * `STAGEDROOT_SYSROOT=` in /etc/stagedroot/environment. None: USAGE naming all four.
 */
export function findSysroot(o: { option?: string; env?: NodeJS.ProcessEnv; places?: SysrootPlaces }): FoundSysroot {
  const option = usable(o.option);
  if (option !== undefined) return { path: option, from: 'option' };
  const env = usable(o.env?.STAGEDROOT_SYSROOT);
  if (env !== undefined) return { path: env, from: 'environment' };
  const record = path.join(o.places?.runDir ?? '/run/stagedroot', 'booted');
  const recorded = usable(parseKeyValues(readText(record) ?? '').get('sysroot'));
  if (recorded !== undefined) return { path: recorded, from: 'boot-record' };
  const envFile = path.join(o.places?.etcDir ?? '/etc/stagedroot', 'environment');
  const configured = usable(parseKeyValues(readText(envFile) ?? '').get('STAGEDROOT_SYSROOT'));
  if (configured !== undefined) return { path: configured, from: 'environment-file' };
  throw new StagedrootError(
    'USAGE',
    `No sysroot given: pass --sysroot DIR, set STAGEDROOT_SYSROOT, boot through stagedroot (its initramfs step records sysroot= in ${record}), or set STAGEDROOT_SYSROOT= in ${envFile} (\`stagedroot adopt\` and \`stagedroot install\` write it)`,
    { option: 'sysroot' },
  );
}
