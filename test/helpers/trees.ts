import type { TreeSpec } from '../../src/testing/index.js';

/**
 * A small booted tree with every kind of entry the lifecycle cares about (16 entries):
 * hardlinked usr/, copied etc/, a private mode, an absolute and a relative symlink, and
 * home/core/test as a regular file (the machine-config-daemon's deadlock).
 */
export const BASE_TREE: TreeSpec = {
  'usr/bin/tool': { content: '#!/bin/sh\necho tool\n', mode: 0o755 },
  'usr/lib/libx.so': 'lib v1\n',
  'etc/hostname': 'node-1\n',
  'etc/motd': 'welcome\n',
  'etc/old.conf': 'old=1\n',
  'etc/ssh/sshd_config': { content: 'PermitRootLogin no\n', mode: 0o600 },
  'etc/localtime': { symlink: '/usr/share/zoneinfo/UTC' },
  'home/core/test': 'a regular file\n',
  bin: { symlink: 'usr/bin' },
};

/** A one-file update spec (distinct content per name, so every deployment differs). */
export function motdUpdate(name: string): { label: string; files: { path: string; contents: string }[] } {
  return { label: name, files: [{ path: '/etc/motd', contents: `motd of ${name}\n` }] };
}
