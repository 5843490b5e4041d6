import type { Issue } from '../errors.js';
import { isUnder } from '../fs/core/paths.js';
import type { ValidationContext } from './types.js';

/**
 * Set-uid/set-gid files a Debian or Fedora base image ships. An update that adds or
 * changes a set-id file elsewhere is rejected; pass your own list to allow more (or
 * fewer): `builtins: { unsafeModes: { setuidAllowList: [...DEFAULT_SETUID_ALLOW_LIST, 'usr/bin/x'] } }`.
 */
export const DEFAULT_SETUID_ALLOW_LIST: readonly string[] = [
  'usr/bin/sudo',
  'usr/bin/su',
  'usr/bin/passwd',
  'usr/bin/chsh',
  'usr/bin/chfn',
  'usr/bin/gpasswd',
  'usr/bin/newgrp',
  'usr/bin/mount',
  'usr/bin/umount',
  'usr/bin/pkexec',
  'usr/bin/fusermount',
  'usr/bin/fusermount3',
  'usr/bin/crontab',
  'usr/bin/chage',
  'usr/bin/expiry',
  'usr/bin/wall',
  'usr/bin/write',
  'usr/bin/ssh-agent',
  'usr/sbin/unix_chkpwd',
  'usr/sbin/pam_timestamp_check',
  'usr/lib/openssh/ssh-keysign',
  'usr/libexec/openssh/ssh-keysign',
  'usr/lib/dbus-1.0/dbus-daemon-launch-helper',
  'usr/libexec/dbus-1/dbus-daemon-launch-helper',
  'usr/lib/polkit-1/polkit-agent-helper-1',
  'usr/libexec/polkit-agent-helper-1',
];

export interface UnsafeModesOptions {
  /** Tree paths (files, or directories meaning everything below) allowed to be set-uid/set-gid. */
  setuidAllowList?: readonly string[];
}

/**
 * Built-in validator over the paths the update changed (the booted tree was accepted
 * before; drift in it is `verify`'s business): world-writable files and directories
 * under etc/ (a sticky directory such as a spool is fine), and set-uid/set-gid regular
 * files outside the allow-list. Symlinks are skipped (their mode means nothing).
 */
export function checkUnsafeModes(ctx: ValidationContext, o: UnsafeModesOptions = {}): Issue[] {
  const allow = o.setuidAllowList ?? DEFAULT_SETUID_ALLOW_LIST;
  const tree = ctx.staged;
  const issues: Issue[] = [];
  const check = (p: string, kind: 'f' | 'd' | 'other', mode: number): void => {
    const octal = mode.toString(8).padStart(4, '0');
    if (isUnder(p, 'etc') && mode & 0o002 && !(kind === 'd' && mode & 0o1000)) {
      issues.push({ code: 'WORLD_WRITABLE', path: p, message: `${kind === 'd' ? 'directory' : 'file'} under etc/ is world-writable (mode ${octal}): any local user could change the configuration`, severity: 'error' });
    }
    if (kind === 'f' && mode & 0o6000 && !allow.some((a) => isUnder(p, a))) {
      const what = mode & 0o4000 && mode & 0o2000 ? 'set-uid and set-gid' : mode & 0o4000 ? 'set-uid' : 'set-gid';
      issues.push({ code: 'SETUID_NOT_ALLOWED', path: p, message: `file is ${what} (mode ${octal}) and not in the set-uid allow-list`, severity: 'error' });
    }
  };
  if (ctx.deltaEntries !== undefined) {
    // The manifest step read every delta path once the update was applied: its entries say the same as an lstat now.
    for (const e of ctx.deltaEntries) if (e.t !== 'l') check(e.p, e.t === 'f' ? 'f' : e.t === 'd' ? 'd' : 'other', e.m);
    return issues;
  }
  for (const p of ctx.delta) {
    let st;
    try {
      st = tree.lstat(p);
    } catch {
      continue;
    }
    if (st === null || st.isSymbolicLink()) continue;
    check(p, st.isFile() ? 'f' : st.isDirectory() ? 'd' : 'other', st.mode & 0o7777);
  }
  return issues;
}
