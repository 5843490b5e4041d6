#!/bin/sh
# A stand-in for systemctl in temp-dir sysroots (the real systemd runs in the real-boot test):
#   fake-systemctl.sh LOG ARGS...   appends "ARGS" to LOG; exits 1 (with a message) when
#   LOG.fail exists and holds exactly that line, as a unit that fails to reload would.
log=$1
shift
echo "$*" >>"$log"
if [ -f "$log.fail" ] && grep -qxF -- "$*" "$log.fail"; then
  echo "Job for ${2:-unit} failed because the control process exited with error code." >&2
  exit 1
fi
exit 0
