#!/bin/sh
# Builds the crash-replay guest's Debian userspace once: a debootstrap minbase bookworm
# with dmsetup (the log-writes target's table), e2fsprogs and xfsprogs (mkfs of the
# logged device) and kmod, kept under the cache directory and rebuilt only when missing.
# No systemd: the guest runs one script as its init. The mirror is the one apt on this
# machine uses (test/vm/debian-mirror.sh, as for the real-boot machines).
set -eu

cache=${1:?usage: build-userspace.sh CACHE_DIR}
out="$cache/replay-userspace"
[ -f "$out/.complete" ] && exit 0

# shellcheck source=test/vm/debian-mirror.sh
. "$(dirname "$0")/../vm/debian-mirror.sh"

url=$(debian_mirror)
[ -n "$url" ] || { echo "crash-replay: no Debian mirror in apt's sources" >&2; exit 1; }
rm -rf "$out.tmp"
mkdir -p "$cache"
echo "crash-replay: debootstrap bookworm from $url into $out" >&2
debootstrap --variant=minbase --include=kmod,dmsetup,e2fsprogs,xfsprogs bookworm "$out.tmp" "$url" >"$cache/replay-debootstrap.log" 2>&1 || {
	tail -n 30 "$cache/replay-debootstrap.log" >&2
	exit 1
}
rm -rf "$out.tmp/var/cache/apt/archives/"*.deb "$out.tmp/var/lib/apt/lists/"*
touch "$out.tmp/.complete"
rm -rf "$out"
mv "$out.tmp" "$out"
