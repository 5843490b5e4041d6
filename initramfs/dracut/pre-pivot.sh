#!/bin/sh
# dracut without systemd: a pre-pivot hook, sourced by dracut's init with the physical
# root at $NEWROOT. The step runs as its own process (its `exit` must not end init).
if getarg stagedroot= >/dev/null; then
	/usr/lib/stagedroot/stagedroot-prepare-root "$NEWROOT" || die "stagedroot-prepare-root failed"
fi
