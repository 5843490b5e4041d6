#!/usr/bin/env bash
# The Debian tools the tests need: the ONE list. `npm test` (the README's test command),
# `npm run test:quick` and `npm run test:boot` run this script first.
#   as root:   installs what is missing (apt-get update once, then apt-get install
#              --no-install-recommends)
#   otherwise: when something is missing, lists the packages and the one command that
#              installs them, and fails (so that no test runs without its tools)
#   --check:   only lists what is missing (exit 1 when something is), installs nothing
# test/helpers/tools.ts reads the `cmd` lines below to name the package of a missing tool.
# A new package goes here, in the commit that first needs it.
set -euo pipefail
# Administrative tools live in sbin, which an ordinary user's PATH may lack.
PATH="$PATH:/usr/sbin:/sbin"

missing=()
# cmd COMMAND PACKAGE: COMMAND on the PATH comes from Debian's PACKAGE.
cmd() { command -v "$1" >/dev/null 2>&1 || add "$2"; }
# file PATH PACKAGE / glob PATTERN PACKAGE: a file the package installs.
file() { [ -e "$1" ] || add "$2"; }
glob() { compgen -G "$1" >/dev/null || add "$2"; }
add() { case " ${missing[*]-} " in *" $1 "*) ;; *) missing+=("$1") ;; esac; }

# systemd (systemctl --root, systemd-analyze verify; busctl, sd-bus's client, checks apply-live's D-Bus wire format)
cmd systemd-analyze systemd
cmd busctl systemd
# dbus-daemon (libdbus's message bus: apply-live's D-Bus client checked against it)
cmd dbus-daemon dbus-daemon
# xfsprogs (reflink tests on an XFS loop mount); coreutils' sync -f
cmd mkfs.xfs xfsprogs
cmd xfs_io xfsprogs
# btrfs storage: subvolumes, snapshots and the crash/kill suites on a btrfs loop mount.
cmd mkfs.btrfs btrfs-progs
# umoci and skopeo (images built as users build them)
cmd umoci umoci
cmd skopeo skopeo
# minisign and signify-openbsd (signatures)
cmd minisign minisign
cmd signify-openbsd signify-openbsd
# zstd (zstd layers)
cmd zstd zstd
# For the initramfs step and the real-boot test: shellcheck, busybox-static, util-linux
# (unshare, findmnt, losetup), qemu-system-x86, cpio, debootstrap, e2fsprogs (mkfs.ext4 -d)
# and the Debian cloud kernel.
cmd shellcheck shellcheck
# Boot entries checked with the bootloaders' own tools: grub-script-check (grub-common)
# for stagedroot.cfg and 09_stagedroot, bootctl (systemd-boot) for the ESP's entries.
cmd grub-script-check grub-common
cmd bootctl systemd-boot
file /bin/busybox busybox-static
cmd unshare util-linux
cmd findmnt util-linux
cmd losetup mount
cmd qemu-system-x86_64 qemu-system-x86
cmd cpio cpio
cmd debootstrap debootstrap
cmd mkfs.ext4 e2fsprogs
# The real-boot test's partitioned disks: sfdisk (fdisk), partx and blkid (util-linux).
cmd sfdisk fdisk
cmd partx util-linux
cmd blkid util-linux
glob '/boot/vmlinuz-*-cloud-amd64' linux-image-cloud-amd64
# UEFI boots of the real-boot test: OVMF firmware, an EFI system partition (mkfs.vfat,
# mtools' mcopy).
file /usr/share/OVMF/OVMF_CODE_4M.fd ovmf
cmd mkfs.vfat dosfstools
cmd mcopy mtools
# Device-mapper targets (dmsetup) for block-level fault and crash tests.
cmd dmsetup dmsetup
# Faithful trees: getfattr/setfattr (attr), setfacl (acl), setcap/getcap (libcap2-bin).
cmd setfattr attr
cmd getfattr attr
cmd setfacl acl
# rsync -a: a local /etc edit that keeps size and mtime (test/merge/unchanged-by-content).
cmd rsync rsync
cmd setcap libcap2-bin
# SELinux labels from a tree's own policy: matchpathcon (selinux-utils); the tests'
# policy is Debian's selinux-policy-default.
cmd matchpathcon selinux-utils
file /etc/selinux/default/contexts/files/file_contexts selinux-policy-default
# Tar archives listed by the readers container tools use, against stagedroot's: GNU tar,
# Go's archive/tar (containerd, umoci; built from fixtures/tar-list), Python's tarfile;
# git archive writes the PAX global header every tar reader meets (test/sources/tar/global-header).
cmd tar tar
cmd go golang-go
# /usr/bin/python3 is python3-minimal's; tarfile is in the full standard library (python3).
cmd python3 python3-minimal
glob '/usr/lib/python3.*/tarfile.py' python3
cmd git git
# The registry source's tests: a real registry (distribution 2.8) on loopback, with
# htpasswd Basic auth (apache2-utils) and TLS from openssl-made certificates; the
# real-boot test's registry scenario pushes its OS image into one with skopeo.
cmd docker-registry docker-registry
cmd htpasswd apache2-utils
cmd openssl openssl
# Signature policies (signedBy): stagedroot verifies simple signing with gpg; skopeo --sign-by makes them
cmd gpg gpg
# The system's CA bundle, which the registry client reads first (test/sources/registry).
file /etc/ssl/certs/ca-certificates.crt ca-certificates
# Debian's archive keys, with which debootstrap checks the mirror's Release file (the
# real-boot and crash-replay userspaces; without them it switches to an unchecked https).
file /usr/share/keyrings/debian-archive-keyring.gpg debian-archive-keyring

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "${1-}" = --check ]; then
  echo "test-setup: missing Debian packages: ${missing[*]}" >&2
  exit 1
fi
if [ "$EUID" -ne 0 ]; then
  {
    echo "test-setup: the tests need these Debian packages, which are not installed:"
    echo "  ${missing[*]}"
    echo "Install them (as root) with:"
    echo "  sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends ${missing[*]}'"
  } >&2
  exit 1
fi
echo "test-setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Without recommends (with them, a fresh machine pulled ~325 more packages, matplotlib and
# GDAL among them): what a test needs is named above. Go's cgo toolchain (gcc) is not:
# the tests build their Go programs with CGO_ENABLED=0.
apt-get install -y -qq --no-install-recommends "${missing[@]}"
