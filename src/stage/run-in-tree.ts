import { StagedrootError } from '../errors.js';
import { PACKAGE_DBS } from '../persistent-dirs/package-db.js';
import { FRESH_DIRS } from '../sources/command.js';
import { runCommand, type CommandResult } from '../util/run-command.js';

export interface RunInTreeOptions {
  /** The shell command line (run by the tree's own /bin/sh). */
  command: string;
  /** The new tree (a private copy: nothing in it is shared with another deployment). */
  tree: string;
  /** An empty directory outside the tree: the command's /var (discarded afterwards). */
  varDir: string;
  /** Directories of the running system bound read-only at the same path in the tree (their mount points exist in the tree). */
  binds?: readonly string[];
  timeoutMs: number;
  onOutput?: (text: string) => void;
  /** Gets the command's result (its bounded output) whatever the outcome. */
  onResult?: (r: CommandResult) => void;
  signal?: AbortSignal;
}

/**
 * The namespace the command runs in, set up by this POSIX sh script (run by unshare in
 * a new mount and PID namespace, so every mount here vanishes with it): the tree's own
 * /proc (new PID namespace; /proc/sys read-only), /sys read-only, a /dev with only the
 * harmless devices (no disk of the running system), fresh /run and /tmp, the scratch /var
 * with the package databases linked to the tree's own, the host's resolver, then a
 * chroot into the tree. The network is the host's. Then each --bind directory (the
 * arguments after the third), read-only, on its mount point: made in the tree beforehand
 * (makeBindMountPoints), or here in the fresh /tmp or /run.
 */
const SETUP = `set -eu
T=$1 V=$2 CMD=$3
shift 3
# A failure here is the machine's, not the update's: exit 125 says so.
trap 'echo "stagedroot: setting up the namespace for the command failed" >&2; exit 125' EXIT
for d in proc sys dev run tmp var; do [ -d "$T/$d" ] || mkdir -m 0755 "$T/$d"; done
mount -t proc -o nosuid,nodev,noexec proc "$T/proc"
for p in sys sysrq-trigger irq bus; do
	if [ -e "$T/proc/$p" ]; then mount --bind "$T/proc/$p" "$T/proc/$p"; mount -o remount,bind,ro "$T/proc/$p"; fi
done
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$T/sys"
mount -t tmpfs -o mode=0755,nosuid,size=16m dev "$T/dev"
for n in null zero full random urandom tty; do : >"$T/dev/$n"; mount --bind "/dev/$n" "$T/dev/$n"; done
mkdir "$T/dev/pts" "$T/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$T/dev/pts"
ln -s pts/ptmx "$T/dev/ptmx"; ln -s /proc/self/fd "$T/dev/fd"
ln -s /proc/self/fd/0 "$T/dev/stdin"; ln -s /proc/self/fd/1 "$T/dev/stdout"; ln -s /proc/self/fd/2 "$T/dev/stderr"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$T/dev/shm"
mount -t tmpfs -o mode=0755,nosuid,nodev run "$T/run"
mkdir -p "$T/run/systemd" "$T/run/lock"
# Tells systemd-detect-virt (and so Debian's kernel hooks, e.g. zz-update-grub) that this is
# no booted system: the bootloader is stagedroot's to update, from the committed deployment.
echo stagedroot >"$T/run/systemd/container"
mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$T/tmp"
mount --bind "$V" "$T/var"
if [ -L "$T/etc/resolv.conf" ]; then
	t=$(readlink "$T/etc/resolv.conf")
	case "$t" in /run/*) mkdir -p "$T$(dirname "$t")"; cat /etc/resolv.conf >"$T$t" 2>/dev/null || :;; esac
elif [ -f "$T/etc/resolv.conf" ] && [ -f /etc/resolv.conf ]; then
	mount --bind /etc/resolv.conf "$T/etc/resolv.conf" && mount -o remount,bind,ro "$T/etc/resolv.conf"
fi
for b in "$@"; do
	case "$b" in ${FRESH_DIRS.map((d) => `/${d}/*`).join('|')}) mkdir -p "$T$b";; esac
	mount --bind "$b" "$T$b"
	mount -o remount,bind,ro "$T$b"
done
trap - EXIT
exec chroot "$T" /bin/sh -c "$CMD"
`;

const SETUP_FAILED = 125;

/** The scratch /var's skeleton: what apt and dpkg expect, the package databases linked to the tree's (their parents made first). */
export function scratchVarLayout(hasDb: (usr: string) => boolean): { dirs: { path: string; mode: number }[]; links: { path: string; target: string }[] } {
  const links = PACKAGE_DBS.filter((db) => hasDb(db.usr)).map((db) => ({ path: db.var.slice('var/'.length), target: `/${db.usr}` }));
  const dirs = ['lib', 'cache/apt/archives/partial', 'log/apt', 'tmp', 'lock'].map((p) => ({ path: p, mode: p === 'tmp' ? 0o1777 : 0o755 }));
  for (const l of links) {
    const parent = l.path.split('/').slice(0, -1).join('/');
    if (parent !== '' && !dirs.some((d) => d.path === parent || d.path.startsWith(`${parent}/`))) dirs.push({ path: parent, mode: 0o755 });
  }
  return { dirs, links };
}

/** The last lines of a command's output, for a failure reason. */
export function outputTail(output: string, lines = 15): string {
  const all = output.trimEnd().split('\n');
  return all.slice(-lines).join('\n');
}

/**
 * Runs `command` inside `tree` in a private mount and PID namespace (`unshare`), as
 * openSUSE's transactional-update runs zypper in a new snapshot. A non-zero exit, a
 * signal or the timeout rejects the update (COMMAND_FAILED, exit 3) with the
 * command's last lines in the reason.
 */
export async function runInTree(o: RunInTreeOptions): Promise<CommandResult> {
  const r = await runCommand(
    { file: 'unshare', args: ['--mount', '--pid', '--fork', '--kill-child', '--propagation', 'private', '--', 'sh', '-c', SETUP, 'stagedroot-run', o.tree, o.varDir, o.command, ...(o.binds ?? [])], display: o.command },
    {
      timeoutMs: o.timeoutMs,
      signal: o.signal,
      onOutput: o.onOutput,
      // DPKG_FORCE=unsafe-io: dpkg skips its fsync per unpacked file (minutes for a kernel
      // package on a slow disk); the staged tree is nobody's root yet, and the stage syncs
      // its whole filesystem before anything commits it (stage.ts, sync).
      env: { DEBIAN_FRONTEND: 'noninteractive', DPKG_FORCE: 'unsafe-io', PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', STAGEDROOT_RUN: '1' },
    },
  );
  o.onResult?.(r);
  if (r.notRunnable) throw new StagedrootError('TOOL_MISSING', `Cannot run a command in the new tree: unshare ${r.notRunnable} (util-linux)`, { value: 'unshare' });
  // A timeout is the command's (the update's), even when it struck during the set-up.
  if (r.exitCode === SETUP_FAILED && !r.timedOut) throw new StagedrootError('IO', `Cannot set up the namespace for the command (unshare, mount, chroot):\n${outputTail(r.output)}`, { value: o.command });
  if (!r.ok) {
    const how = r.timedOut ? `timed out after ${o.timeoutMs / 1000}s` : r.signal ? `was killed by ${r.signal}` : `exited ${r.exitCode}`;
    throw new StagedrootError('COMMAND_FAILED', `The command \`${o.command}\` ${how} in the new tree; its last lines:\n${outputTail(r.output)}`, { value: o.command });
  }
  return r;
}
