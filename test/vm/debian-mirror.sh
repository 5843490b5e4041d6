# Sourced by the VM tests' build-userspace.sh: debian_mirror prints the first http(s) URI of
# the Debian main archive in this machine's apt sources (one-line and deb822 formats), so
# that a guest's debootstrap uses the mirror this machine already reaches.
debian_mirror() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		sed -n -e 's/^URIs:[[:space:]]*\(http[^[:space:]]*debian\)[[:space:]]*$/\1/p' \
			-e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\(http[^[:space:]]*debian\)[[:space:]].*$/\2/p' "$f"
	done | head -n 1
}
