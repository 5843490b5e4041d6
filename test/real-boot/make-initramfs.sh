#!/bin/sh
# Builds the real-boot test's initramfs: busybox-static, the virtio block modules of the
# host's kernel, an /init that mounts the physical root at /sysroot, and the
# stagedroot-prepare-root step taken from the deployment it is given (where
# `stagedroot install` put it, as a user's initramfs hook would copy it).
set -eu

kver=${1:?usage: make-initramfs.sh KERNEL_VERSION PREPARE_ROOT OUT}
prepare_root=${2:?}
out=${3:?}
here=$(cd "$(dirname "$0")" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/dev" "$work/proc" "$work/sys" "$work/run" "$work/sysroot" \
	"$work/lib/modules" "$work/usr/lib/stagedroot"
cp /bin/busybox "$work/bin/busybox"
for applet in $(/bin/busybox --list); do
	[ -e "$work/bin/$applet" ] || ln -s busybox "$work/bin/$applet"
done
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk; do
	f=$(find "/usr/lib/modules/$kver/kernel" -name "$m.ko" | head -n 1)
	[ -n "$f" ] || { echo "make-initramfs: no $m.ko for kernel $kver" >&2; exit 1; }
	cp "$f" "$work/lib/modules/"
	echo "$m" >>"$work/lib/modules/order"
done
cp "$prepare_root" "$work/usr/lib/stagedroot/stagedroot-prepare-root"
chmod 755 "$work/usr/lib/stagedroot/stagedroot-prepare-root"
cp "$here/initramfs-init" "$work/init"
chmod 755 "$work/init"
(cd "$work" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
