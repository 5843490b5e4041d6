// What every real-boot scenario uses: one boot with a step script run in the guest
// (after multi-user.target and the health service; it reports "@key value" lines and
// then reboots, which runs stagedroot-finalize.service, or powers off), and the checks
// that collect what went wrong.
import * as fs from 'node:fs';
import { boot, consoleTime } from './vm.mjs';

/** The sysroot's path as the booted system sees it: `/stagedroot` on the physical root, mounted at /sysroot. */
export const SYSROOT = '/sysroot/stagedroot';

// unit_ms: how long a unit took to start, measured as `systemd-analyze blame` does
// (activating → active), read while the boot is still running (blame itself waits for
// the boot to finish, and this step is part of it).
const HELPERS = `
r() { printf '@%s %s\\n' "$1" "$2"; }
st() { stagedroot status --json | base64 -w0; }
# A unit's journal of this boot, base64 (one line), for the host to decode on failure.
jr() { journalctl -b -u "$1" --no-pager -o short-monotonic 2>&1 | tail -n 60 | base64 -w0; }
unit_ms() {
	s=$(systemctl show -P InactiveExitTimestampMonotonic "$1"); e=$(systemctl show -P ActiveEnterTimestampMonotonic "$1")
	if [ "\${e:-0}" -gt 0 ] && [ "\${s:-0}" -gt 0 ]; then echo "$(( (e - s) / 1000 ))ms"; else echo "$(systemctl is-active "$1")"; fi
}
r uptime "$(cut -d' ' -f1 /proc/uptime)"
r kernel "$(uname -r)"
r cmdline "$(cat /proc/cmdline)"
r root "$(findmnt -no SOURCE /)"
r record "$(tr '\\n' ' ' 2>&1 </run/stagedroot/booted)"
r unit-times "boot $(unit_ms stagedroot-boot.service), health $(unit_ms stagedroot-health.service)"
# systemd-analyze blame's own figures for the boot units, once the boot is finished (the
# step unit is Type=simple: it is not part of the wait; a machine kept from before that
# has a oneshot step, and the boot would never finish while it runs).
if [ "$(systemctl show -P Type stagedroot-test-step.service)" = simple ]; then timeout 120 systemctl is-system-running --wait >/dev/null 2>&1; fi
r blame "$(systemd-analyze blame --no-pager 2>&1 | grep -E 'stagedroot|Bootup' | tr -s ' ' | tr '\\n' ',')"
r analyze-time "$(systemd-analyze time 2>&1 | head -n 1)"
r boot-journal "$(jr stagedroot-boot.service)"
r health-journal "$(jr stagedroot-health.service)"
`;

export const spec = (o) => `cat >/run/spec.json <<'SPEC'\n${JSON.stringify(o)}\nSPEC\n`;
/** A long stage command, its output streamed to the console as it runs: reports stage-exit. */
export const STREAMED_STAGE = (cmd) => `{ ${cmd}; echo $? >/run/stage.rc; } 2>&1 | tee /run/stage.log >/dev/console; r stage-exit "$(cat /run/stage.rc)"\n`;
export const STAGE = 'stagedroot stage /run/spec.json >/run/stage.log 2>&1; r stage-exit $?; cat /run/stage.log >/dev/console\n';
export const REBOOT = 'r status "$(st)"\nsystemctl --no-block reboot\n';
export const POWEROFF = 'r status "$(st)"\nsystemctl --no-block poweroff\n';

/** The console's lines saying a mount could not be unmounted at shutdown (colour codes removed), each once. */
export function uncleanShutdown(consoleText) {
  const lines = consoleText
    .split('\n')
    // eslint-disable-next-line no-control-regex
    .map((l) => l.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').replace(/^\[\s*\d+\.\d+\]\s*/, '').replace(/^\(sd-\w+\)\[\d+\]:\s*/, '').trim())
    .filter((l) => /Failed unmounting|Failed to unmount/.test(l));
  return [...new Set(lines)];
}

export const dep = (status, id) => status?.deployments?.find((d) => d.id === id) ?? null;
export const decode = (b64) => {
  try {
    return b64 ? JSON.parse(Buffer.from(b64, 'base64').toString()) : null;
  } catch {
    return null;
  }
};

/** Collects what went wrong in one scenario; `boot` keeps each boot's log and timings. */
export class Scenario {
  constructor(name, env, machine = env.machine) {
    this.name = name;
    this.env = env;
    this.machine = machine;
    this.failures = [];
    this.boots = [];
    /** Said under the scenario's line whether it passes or not. */
    this.notes = [];
  }
  async boot(label, step, o = {}) {
    const n = this.env.nextBoot();
    const logBase = `${this.env.out}/boot-${String(n).padStart(2, '0')}-${label}`;
    let r = await boot({ ...this.machine, logBase, step: HELPERS + step, ...o });
    // A boot whose kernel died before it ran the initramfs (TCG on a loaded host) touched
    // nothing on the disk: it is run again, its log kept beside.
    for (let retry = 1; retry <= 2 && !fs.readFileSync(r.consoleLog, 'utf8').includes('Run /init as init process'); retry++) {
      fs.renameSync(r.consoleLog, `${logBase}.console.before-retry-${retry}.log`);
      this.env.log(`  boot ${n} ${label}: the kernel died before it ran the initramfs (${r.ended}); booting again`);
      r = await boot({ ...this.machine, logBase, step: HELPERS + step, ...o });
    }
    // The boot units' journals, kept beside the console log (the step sends them base64).
    for (const unit of ['boot', 'health']) {
      const j = r.results.get(`${unit}-journal`);
      if (j) fs.writeFileSync(`${logBase}.${unit}-unit.log`, Buffer.from(j, 'base64'));
    }
    const initramfs = consoleTime(r.consoleLog, /stagedroot: booting deployment/);
    const unitTimes = r.results.get('unit-times') ?? null;
    const blame = r.results.get('blame') ?? null;
    const analyzeTime = r.results.get('analyze-time') ?? null;
    this.boots.push({ label, seconds: r.seconds, initramfs, stepAt: r.results.has('uptime') ? Number(r.results.get('uptime')) : null, unitTimes, blame, analyzeTime, ended: r.ended });
    const at = r.results.has('uptime') ? `, step at ${r.results.get('uptime')}s of uptime, ${r.results.get('kernel')}, units: ${unitTimes}` : '';
    this.env.log(`  boot ${n} ${label}: ${r.ended} after ${r.seconds.toFixed(1)}s${at} (${r.consoleLog})`);
    return { ...r, status: decode(r.results.get('status')) };
  }
  check(cond, what) {
    if (!cond) this.failures.push(what);
    return cond;
  }
  eq(actual, expected, what) {
    return this.check(actual === expected, `${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
  rootIs(r, id, when) {
    return this.check((r.results.get('root') ?? '').includes(`/deploy/${id}/tree`), `${when}: / should be deployment ${id}, findmnt says ${JSON.stringify(r.results.get('root') ?? null)}`);
  }
  /**
   * The boot ended as its step asked (qemu exited), and its shutdown was clean: no mount
   * that systemd (PID 1, `Failed unmounting X.mount`) or systemd-shutdown (`Failed to
   * unmount /usr`, what Debian's split-usr systemd 252 printed for the read-only /usr
   * bind) could not unmount.
   */
  clean(r, when) {
    if (r.ended !== 'exited') this.failures.push(`${when}: the boot ended with ${r.ended} (see ${r.consoleLog})`);
    const unmounts = uncleanShutdown(fs.readFileSync(r.consoleLog, 'utf8'));
    if (unmounts.length > 0) this.failures.push(`${when}: the shutdown left mounts behind: ${unmounts.join('; ')} (see ${r.consoleLog})`);
  }
  /** A check of what one piece of stagedroot brings: a failure names the piece. */
  needs(cond, piece, what) {
    return this.check(cond, `${what} (the piece: ${piece})`);
  }
}
