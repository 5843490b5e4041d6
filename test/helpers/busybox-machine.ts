import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildTree, type TreeSpec } from '../../src/testing/index.js';

const APPLETS = ['sh', 'cat', 'echo', 'mkdir', 'rm', 'sleep', 'ls', 'test', 'hostname', 'touch', 'grep', 'printf', 'cp', 'ln'];
const BUSYBOX = ['/bin/busybox', '/usr/bin/busybox'].find((p) => fs.existsSync(p));

/** Why commands cannot run in a machine's tree here (a mount namespace needs root; the tree needs a static busybox), or null. */
export const WHY_NO_RUN: string | null = process.getuid?.() !== 0 ? 'not root (a mount namespace needs root)' : BUSYBOX === undefined ? 'no static busybox (apt-get install busybox-static)' : null;

/** A small Debian-like machine whose tree can run commands: a static busybox and its applets, dpkg-like records, and `extra`. */
export function busyboxMachine(root: string, extra: TreeSpec = {}): void {
  buildTree(root, {
    'etc/os-release': 'ID=debian\n',
    'etc/hostname': 'machine\n',
    'usr/lib/tool.conf': 'version 1\n',
    'var/lib/dpkg/status': 'Package: base\nStatus: install ok installed\n\n',
    'var/lib/apt/extended_states': '',
    'var/log/old.log': 'old\n',
    'proc/': { dir: true },
    ...extra,
  });
  fs.mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
  fs.copyFileSync(BUSYBOX!, path.join(root, 'usr/bin/busybox'));
  fs.chmodSync(path.join(root, 'usr/bin/busybox'), 0o755);
  for (const a of APPLETS) fs.symlinkSync('busybox', path.join(root, 'usr/bin', a));
  fs.symlinkSync('usr/bin', path.join(root, 'bin'));
}
