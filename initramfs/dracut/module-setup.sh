#!/bin/bash
# dracut module 50stagedroot: stagedroot-prepare-root in the initramfs. Included only on
# request (`dracut --add stagedroot`, or add_dracutmodules+=" stagedroot " in
# /etc/dracut.conf.d/), as ostree's module is. The work is the one script; this file is
# only its wiring.
# dracut sets moddir, initdir, systemdsystemunitdir and SYSTEMCTL before it calls these.
# shellcheck disable=SC2154

check() {
	[[ -x /usr/lib/stagedroot/stagedroot-prepare-root ]] || return 1
	return 255
}

depends() {
	return 0
}

install() {
	inst_multiple cat readlink mount umount mkdir rmdir mv sync dirname
	inst_simple /usr/lib/stagedroot/stagedroot-prepare-root
	if dracut_module_included "systemd"; then
		inst_simple "$moddir/stagedroot-prepare-root.service" "$systemdsystemunitdir/stagedroot-prepare-root.service"
		$SYSTEMCTL -q --root "$initdir" add-wants initrd-root-fs.target stagedroot-prepare-root.service
	else
		inst_hook pre-pivot 50 "$moddir/pre-pivot.sh"
	fi
}
