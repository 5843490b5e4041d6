#!/bin/sh
# Builds the Debian userspace the real-boot test installs stagedroot into, once: a
# debootstrap minbase bookworm with systemd, kept under the cache directory and rebuilt
# only when missing. The mirror is the one apt on this machine uses.
set -eu

cache=${1:?usage: build-userspace.sh CACHE_DIR}
out="$cache/userspace"
[ -f "$out/.complete" ] && exit 0

mirror() {
	# The first http(s) URI of the Debian main archive in apt's sources.
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		sed -n -e 's/^URIs:[[:space:]]*\(http[^[:space:]]*debian\)[[:space:]]*$/\1/p' \
			-e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\(http[^[:space:]]*debian\)[[:space:]].*$/\2/p' "$f"
	done | head -n 1
}

url=$(mirror)
[ -n "$url" ] || { echo "build-userspace: no Debian mirror in apt's sources" >&2; exit 1; }
rm -rf "$out.tmp"
mkdir -p "$cache"
echo "build-userspace: debootstrap bookworm from $url into $out" >&2
debootstrap --variant=minbase --include=systemd-sysv,udev,kmod bookworm "$out.tmp" "$url" >"$cache/debootstrap.log" 2>&1 || {
	tail -n 30 "$cache/debootstrap.log" >&2
	exit 1
}
# apt's caches are not needed in the image.
rm -rf "$out.tmp/var/cache/apt/archives/"*.deb "$out.tmp/var/lib/apt/lists/"*
touch "$out.tmp/.complete"
rm -rf "$out"
mv "$out.tmp" "$out"
