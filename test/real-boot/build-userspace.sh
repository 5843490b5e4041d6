#!/bin/sh
# Builds, once, the slow part of the real-boot test's machine: a debootstrap bookworm
# userspace as a Debian install has it (systemd, udev, fsck.ext4 and fsck.fat: a UEFI
# machine checks its ESP at boot, which a power cut can leave dirty; Debian's cloud kernel with an
# initramfs-tools initramfs, busybox for it; docker-registry, its unit disabled, for the
# scenario that runs a registry inside the guest, registry.mjs), plus the packages the machines install
# later from local files, fetched now so that no guest needs the network:
#   debs/grub-pc/       grub-pc and what it needs (the SeaBIOS machine's bootloader)
#   debs/systemd-boot/  systemd-boot and what it needs (the OVMF machine's)
#   debs/kernel2/       linux-image-amd64: a second kernel, another flavour (uname -r)
# OUT is rebuilt when missing; the caller names it after a hash of this recipe, so a
# changed recipe builds a new one. The mirror is the one apt on this machine uses.
set -eu

out=${1:?usage: build-userspace.sh OUT_DIR}
[ -f "$out/.complete" ] && exit 0

# shellcheck source=test/vm/debian-mirror.sh
. "$(dirname "$0")/../vm/debian-mirror.sh"

url=$(debian_mirror)
[ -n "$url" ] || { echo "build-userspace: no Debian mirror in apt's sources" >&2; exit 1; }
tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
log=$tmp.log
echo "build-userspace: debootstrap bookworm from $url into $out (log: $log)" >&2
fail() {
	tail -n 40 "$log" >&2
	echo "build-userspace: $*" >&2
	exit 1
}
debootstrap --variant=minbase \
	--include=systemd-sysv,udev,kmod,e2fsprogs,dosfstools,busybox,initramfs-tools,linux-image-cloud-amd64,docker-registry \
	bookworm "$tmp/root" "$url" >"$log" 2>&1 || fail "debootstrap failed"
# The registry runs only when a scenario starts it (on its own disk), not at every boot.
systemctl --root="$tmp/root" disable docker-registry.service >>"$log" 2>&1 || fail "cannot disable docker-registry.service"

# Download (not install) each later package set with the userspace's own apt, so that
# the set is exactly what this userspace lacks.
for set in grub-pc systemd-boot kernel2; do
	case $set in
	kernel2) pkgs=linux-image-amd64 ;;
	*) pkgs=$set ;;
	esac
	mkdir -p "$tmp/root/tmp/debs/partial"
	DEBIAN_FRONTEND=noninteractive chroot "$tmp/root" apt-get install -y --download-only \
		-o Dir::Cache::Archives=/tmp/debs $pkgs >>"$log" 2>&1 || fail "cannot download $pkgs"
	mkdir -p "$tmp/debs/$set"
	mv "$tmp/root/tmp/debs/"*.deb "$tmp/debs/$set/"
	rm -rf "$tmp/root/tmp/debs"
done
# apt's package cache is not part of an installed machine.
rm -rf "$tmp/root/var/cache/apt/archives/"*.deb
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
mv "$log" "$out/build.log"
