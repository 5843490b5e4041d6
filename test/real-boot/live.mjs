// Scenario (e): apply-live under a real systemd, on the UEFI machine as (d) left it (or,
// run alone, a new one adopted first). Three tiny services and a MachineConfiguration
// disruption policy naming them go into the guest's /etc; a spec changing an SSH key (the
// shared /root's), a registry-mirror file (Reload of one service) and a file another reads
// at start (Restart) is staged and applied live (--health): no reboot, the reloaded service
// keeps its PID and saw one reload, the restarted one runs the new file, status says so. A
// second spec whose Restart fails (the service's ExecStartPre refuses the new file) is
// undone: files back, the service on the old file, the deployment staged. A third is cut
// by a power cut while its reload runs: the next boot is the first one's deployment with
// its files and /etc edits made after its stage and after it (carried at boot: the crash
// skipped finalize; the apply merged only the update's own paths),
// the third undone and staged, and the old deployment's tree (the rollback) has its own
// files back; its reboot path then boots it. There a fourth config is applied live (a
// mirror written, a file removed) and the machine rebooted cleanly: the next boot is that
// deployment with /etc edits made before and after the apply (carried by the shutdown's finalize),
// the tree it ran in has its own files back, and a rollback to it boots them. The bench
// figure: from the end of the first stage to the change being live, against that reboot
// cycle (finalize at shutdown, firmware, boot to the health service), in the same run;
// beside it the uptime of each of apply-live's steps, `node -e 0`, `stagedroot --version`
// and `stagedroot status` with and without the code cache, and CPU profiles of the second
// (failing) apply-live (OUT/live-b.cpuprofile.gz) and of the fourth (successful, through its
// commit: OUT/live-e.cpuprofile.gz).
import * as fs from 'node:fs';
import { ADOPTION_COMMANDS, adoptionStep } from './adopt.mjs';
import { buildMachine } from './image.mjs';
import { REBOOT, SYSROOT, Scenario, decode, dep, spec } from './scenario.mjs';

const MIRROR = 'etc/containers/registries.conf.d/50-live-mirror.conf';
/** Its presence makes the reload sleep (the power cut's window). */
const SLOW = 'etc/containers/registries.conf.d/zz-slow.conf';
const RESTART_CONF = 'etc/live-test/restart.conf';
const FAIL_CONF = 'etc/live-test/fail.conf';
const KEY = 'root/.ssh/authorized_keys';
const UNITS = ['live-reload.service', 'live-restart.service', 'live-fail.service'];

const mirror = (n) => `[[registry]]\nlocation = "quay.io/live-test"\n[[registry.mirror]]\nlocation = "mirror-${n}.example"\n`;
const key = (n) => `ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIlive${n} live-test-${n}\n`;

/** The policy the admin puts in the booted /etc: what each test file's change means. */
const POLICY = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/containers/registries.conf.d
      actions:
      - type: Reload
        reload:
          serviceName: live-reload.service
    - path: /${RESTART_CONF}
      actions:
      - type: Restart
        restart:
          serviceName: live-restart.service
    - path: /${FAIL_CONF}
      actions:
      - type: Restart
        restart:
          serviceName: live-fail.service
`;

// The services: live-reload logs each reload with the mirror it reads then (its PID stays);
// live-restart and live-fail write "PID content" of their file at start; live-fail's
// ExecStartPre refuses a file that says "bad", as a daemon's config check would.
const UNIT_FILES = {
  'live-reload.service': `[Unit]
Description=stagedroot real-boot test: reloaded live
[Service]
ExecStart=/bin/sleep infinity
ExecReload=/bin/sh -c 'echo "reload $$(grep -o "mirror-[0-9]*" /${MIRROR})" >>/run/live-reload.log; if [ -e /${SLOW} ]; then touch /run/live-reload.slow; sleep 600; fi'
[Install]
WantedBy=multi-user.target
`,
  'live-restart.service': `[Unit]
Description=stagedroot real-boot test: restarted live
[Service]
ExecStart=/bin/sh -c 'echo "$$$$ $$(cat /${RESTART_CONF})" >/run/live-restart.seen; exec sleep infinity'
[Install]
WantedBy=multi-user.target
`,
  'live-fail.service': `[Unit]
Description=stagedroot real-boot test: its restart fails with a bad file
[Service]
ExecStartPre=/bin/sh -c 'if [ "$$(cat /${FAIL_CONF})" = bad ]; then echo "live-fail: /${FAIL_CONF} is bad" >&2; exit 1; fi'
ExecStart=/bin/sh -c 'echo "$$$$ $$(cat /${FAIL_CONF})" >/run/live-fail.seen; exec sleep infinity'
[Install]
WantedBy=multi-user.target
`,
};

const heredoc = (file, text) => `cat >${file} <<'LIVE_EOF'\n${text}LIVE_EOF\n`;

/** The admin's set-up: the old files, the policy, the services enabled and running. */
const SETUP = `mkdir -p /etc/live-test /etc/containers/registries.conf.d /etc/stagedroot
install -d -m 0700 /root/.ssh
${heredoc(`/${KEY}`, key(1))}chmod 0600 /${KEY}
${heredoc(`/${MIRROR}`, mirror(1))}echo v1 >/${RESTART_CONF}
echo good >/${FAIL_CONF}
${heredoc('/etc/stagedroot/disruption-policy.yaml', POLICY)}${Object.entries(UNIT_FILES)
  .map(([name, text]) => heredoc(`/etc/systemd/system/${name}`, text))
  .join('')}systemctl daemon-reload
systemctl enable --now ${UNITS.join(' ')} >/dev/console 2>&1
`;

/** Shell helpers: a unit's main PID; wait (up to 15 s) until a file's line names that PID; the time; a file base64. */
const FNS = `pid() { systemctl show -P MainPID "$1"; }
seen() { i=0; while [ $i -lt 75 ]; do [ "$(cut -d' ' -f1 "$2" 2>/dev/null)" = "$(pid "$1")" ] && break; sleep 0.2; i=$((i + 1)); done; cat "$2" 2>&1; }
now() { date +%s.%N; }
b64() { base64 -w0 "$1" 2>/dev/null; }
`;

/** A stage of /run/spec.json with --json; reports NAME-exit and NAME (its JSON, base64) and when it ended. */
const stage = (name) => `stagedroot stage --json /run/spec.json >/run/${name}.json 2>/run/${name}.err; r ${name}-exit $?; r ${name}-ended "$(now)"; r ${name} "$(b64 /run/${name}.json)"; cat /run/${name}.err >/dev/console\n`;
/** apply-live --json; reports NAME-exit, NAME (stdout, base64) and NAME-err. */
const applyLiveJson = (name) => `mkdir -p /run/prof; node --cpu-prof --cpu-prof-dir=/run/prof "$(readlink -f "$(command -v stagedroot)")" apply-live --json >/run/${name}.json 2>/run/${name}.err; r ${name}-exit $?; r ${name} "$(b64 /run/${name}.json)"; r ${name}-err "$(b64 /run/${name}.err)"; cat /run/${name}.err >/dev/console\n`;
/**
 * apply-live ARGS as an admin runs it, each line of its output (its steps on stderr) with
 * the uptime it came at (read by the shell itself: a process a line would add to the time
 * measured, under TCG); reports NAME-exit, NAME-log (base64) and NAME-ended.
 */
const applyLiveTimed = (name, args = '') => `{ echo '@start'; stagedroot apply-live ${args} 2>&1; echo "@rc $?"; } | while IFS= read -r l; do read -r up _ </proc/uptime; echo "$up $l"; done >/run/${name}.log
r ${name}-ended "$(now)"; r ${name}-exit "$(sed -n 's/.* @rc //p' /run/${name}.log)"; r ${name}-log "$(b64 /run/${name}.log)"; cat /run/${name}.log >/dev/console
`;
/** The files and services as the running system has them, reported under PREFIX-. */
const observe = (p) => `r ${p}-key "$(cat /${KEY} 2>&1)"
r ${p}-key-mode "$(stat -c %a /${KEY} 2>&1)"
r ${p}-mirror "$(grep -o 'mirror-[0-9]*' /${MIRROR} 2>&1)"
r ${p}-slow "$(test -e /${SLOW} && echo present || echo absent)"
r ${p}-restart-conf "$(cat /${RESTART_CONF} 2>&1)"
r ${p}-fail-conf "$(cat /${FAIL_CONF} 2>&1)"
r ${p}-active "$(systemctl is-active ${UNITS.join(' ')} | tr '\\n' ' ')"
r ${p}-reload-pid "$(pid live-reload.service)"
r ${p}-reload-log "$(tr '\\n' ',' </run/live-reload.log 2>/dev/null)"
r ${p}-restart-seen "$(seen live-restart.service /run/live-restart.seen)"
r ${p}-fail-seen "$(seen live-fail.service /run/live-fail.seen)"
r ${p}-status "$(st)"
`;

const secs = (r, from, to) => {
  const a = Number(r.results.get(from));
  const b = Number(r.results.get(to));
  return Number.isFinite(a) && Number.isFinite(b) && a > 0 && b > 0 ? b - a : null;
};

/** The UEFI machine of (d), or when (d) did not run, a new one put under stagedroot first (one boot). */
async function machineFor(s, env) {
  if (env.uefi) return env.uefi;
  s.machine = { ...buildMachine({ firmware: 'uefi', us: env.us, work: env.out, tarball: env.tarball, log: env.log }), packages: env.packages };
  env.uefi = s.machine;
  const a = await s.boot('e-adopt', `${adoptionStep('uefi')}systemctl --no-block poweroff\n`);
  s.clean(a, 'the adoption boot');
  ADOPTION_COMMANDS.uefi.forEach((c, i) => s.eq(a.results.get(`adopt-${i}`), '0', `exit code of \`${c}\``));
  return s.machine;
}

/** Seconds of uptime of the first line of an apply-live log that says `apply-live: STEP` (its steps on stderr). */
function stepTimes(log) {
  const out = {};
  for (const line of log.split('\n')) {
    const m = /^(\d+\.\d+) apply-live: (\S+)/.exec(line);
    if (m && !(m[2] in out)) out[m[2]] = Number(m[1]);
    const e = /^(\d+\.\d+) (@start|@rc|applied live)/.exec(line);
    if (e && !(e[2] in out)) out[e[2]] = Number(e[1]);
  }
  return out;
}

export async function liveApplyOnUefi(env) {
  const s = new Scenario('(e) apply-live under systemd: an SSH key, a mirror (Reload, PID kept) and a Restart live; a failing Restart undone; a power cut in a second live apply: the next boot is the first one with its files and a later /etc edit, the second undone; its reboot path boots; the rollback tree has its own files back; a clean reboot after a live apply keeps a later /etc edit, and a rollback boots the old files', env, env.uefi ?? null);
  s.machine = await machineFor(s, env);

  // Boot 1: the set-up; the live apply; an /etc edit after it; the failing one; a third cut by a power cut in its reload.
  const a = await s.boot('e-live', `${FNS}${SETUP}${observe('before')}r cli-start "$(now)"; stagedroot status >/dev/null; r cli-end "$(now)"
r node-start "$(now)"; node -e 0; r node-end "$(now)"
r version-start "$(now)"; stagedroot --version >/dev/null; r version-end "$(now)"
r nocache-start "$(now)"; STAGEDROOT_CODE_CACHE=0 stagedroot status >/dev/null; r nocache-end "$(now)"
${spec({ label: 'e-live', files: [{ path: `/${KEY}`, contents: key(2), mode: '0600' }, { path: `/${MIRROR}`, contents: mirror(2) }, { path: `/${RESTART_CONF}`, contents: 'v2\n' }] })}${stage('stage-a')}echo "edited before the live apply" >/etc/live-test/before-apply
${applyLiveTimed('live-a', '--health')}${observe('after-a')}
echo "edited after the live apply" >/etc/live-test/after-apply
${spec({ label: 'e-fails', files: [{ path: `/${KEY}`, contents: key(3), mode: '0600' }, { path: `/${FAIL_CONF}`, contents: 'bad\n' }] })}${stage('stage-b')}${applyLiveJson('live-b')}${observe('after-b')}
r prof-b "$(cat /run/prof/*.cpuprofile | gzip -c | base64 -w0)"
r discard-exit "$(stagedroot discard >/dev/console 2>&1; echo $?)"
${spec({ label: 'e-cut', files: [{ path: `/${KEY}`, contents: key(4), mode: '0600' }, { path: `/${MIRROR}`, contents: mirror(4) }, { path: `/${SLOW}`, contents: '# the reload sleeps\n' }] })}${stage('stage-d')}
stagedroot apply-live >/dev/console 2>&1 &
i=0; while [ ! -e /run/live-reload.slow ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
r cut-journal "$(ls ${SYSROOT}/live-apply 2>&1 | tr '\\n' ' ')"
r cut-mirror "$(grep -o 'mirror-[0-9]*' /${MIRROR} 2>&1)"
r cut "$(tr '\\n' ',' </run/live-reload.log 2>&1)"
sleep 600
`, { killOn: 'cut' });
  s.eq(a.ended, 'power-cut', 'the live apply boot (cut while the third apply reloads)');
  const before = decode(a.results.get('before-status'));
  const old = before?.booted ?? null;
  s.eq(a.results.get('before-active'), 'active active active ', 'the test services after the set-up');
  s.eq(a.results.get('stage-a-exit'), '0', 'stage of the live config');
  const stageA = decode(a.results.get('stage-a'));
  const liveId = stageA?.id ?? null;
  s.eq(stageA?.activation?.mode, 'live', 'stage --json activation.mode');
  s.eq(JSON.stringify(stageA?.activation?.actions?.map((x) => x.reload?.serviceName ?? x.restart?.serviceName ?? x.type).sort()), JSON.stringify(['live-reload.service', 'live-restart.service']), 'stage --json activation.actions (their services)');
  const logA = Buffer.from(a.results.get('live-a-log') ?? '', 'base64').toString();
  s.eq(a.results.get('live-a-exit'), '0', `apply-live --health exit code (its output: ${logA.trim()})`);
  s.check(/apply-live: health/.test(logA), `apply-live --health should run the health checks: ${logA.trim()}`);
  // No reboot: the same boot goes on (the step is still running) with the new files.
  s.eq(a.results.get('after-a-key'), key(2).trim(), 'the SSH key after apply-live (the shared /root)');
  s.eq(a.results.get('after-a-key-mode'), '600', 'its mode');
  s.eq(a.results.get('after-a-mirror'), 'mirror-2', 'the mirror file after apply-live');
  s.eq(a.results.get('after-a-active'), 'active active active ', 'the services after apply-live');
  s.eq(a.results.get('after-a-reload-pid'), a.results.get('before-reload-pid'), "the reloaded service's PID (kept)");
  s.eq(a.results.get('after-a-reload-log'), 'reload mirror-2,', "the reloaded service's reloads (one, reading the new mirror)");
  const pidOf = (k) => a.results.get(k)?.split(' ')[0];
  s.check(pidOf('after-a-restart-seen') !== pidOf('before-restart-seen'), `the restarted service should have a new PID: before ${a.results.get('before-restart-seen')}, after ${a.results.get('after-a-restart-seen')}`);
  s.eq(a.results.get('after-a-restart-seen')?.split(' ')[1], 'v2', 'what the restarted service read at its start');
  const stA = decode(a.results.get('after-a-status'));
  s.eq(stA?.current, liveId, 'status.current after apply-live');
  s.eq(stA?.booted, old, 'status.booted after apply-live (no reboot)');
  s.eq(stA?.staged, null, 'status.staged after apply-live');
  s.eq(stA?.pendingReboot, false, 'status.pendingReboot after apply-live');
  s.eq(JSON.stringify(stA?.activeLive), JSON.stringify({ deployment: liveId, runningIn: old }), 'status.activeLive after apply-live');
  s.eq(dep(stA, liveId)?.liveApplied?.from, old, "the deployment's liveApplied.from");
  s.eq(dep(stA, liveId)?.liveApplied?.paths, 2, "the deployment's liveApplied.paths (the mirror and the restart file; the key is the shared /root's)");

  // The failing Restart: undone, files and services back, the deployment still staged.
  s.eq(a.results.get('stage-b-exit'), '0', 'stage of the config whose Restart fails');
  const failId = decode(a.results.get('stage-b'))?.id ?? null;
  s.eq(decode(a.results.get('stage-b'))?.activation?.mode, 'live', "the failing config's activation.mode");
  s.eq(a.results.get('live-b-exit'), '1', 'apply-live exit code of the failing Restart');
  s.eq(decode(a.results.get('live-b'))?.error?.code, 'LIVE_ACTION_FAILED', 'apply-live --json error.code of the failing Restart');
  s.eq(a.results.get('after-b-key'), key(2).trim(), 'the SSH key after the undo');
  s.eq(a.results.get('after-b-fail-conf'), 'good', "live-fail's file after the undo");
  s.eq(a.results.get('after-b-active'), 'active active active ', 'the services after the undo');
  s.eq(a.results.get('after-b-fail-seen')?.split(' ')[1], 'good', 'what live-fail read when the undo restarted it');
  s.check(pidOf('after-b-fail-seen') !== pidOf('after-a-fail-seen'), `the undo should have restarted live-fail (a new PID): ${a.results.get('after-a-fail-seen')} then ${a.results.get('after-b-fail-seen')}`);
  const stB = decode(a.results.get('after-b-status'));
  s.eq(stB?.staged, failId, 'status.staged after the undo (the reboot path kept)');
  s.eq(stB?.current, liveId, 'status.current after the undo');
  s.eq(stB?.lastFailure?.phase, 'apply-live', 'status.lastFailure.phase');
  s.eq(stB?.lastFailure?.id, failId, 'status.lastFailure.id');
  s.check(`${stB?.lastFailure?.reason ?? ''}`.includes('live-fail.service'), `status.lastFailure should name the failed restart: ${JSON.stringify(stB?.lastFailure)}`);
  s.eq(a.results.get('discard-exit'), '0', 'stagedroot discard of the failed one');
  s.eq(a.results.get('stage-d-exit'), '0', 'stage of the config applied at the power cut');
  const cutId = decode(a.results.get('stage-d'))?.id ?? null;
  s.check((a.results.get('cut') ?? '').includes('reload mirror-4'), `the power cut should come while the reload reads the third config's mirror: ${a.results.get('cut')}`);
  s.check(/journal\.json/.test(a.results.get('cut-journal') ?? ''), `the live apply's journal should be there at the power cut: ${a.results.get('cut-journal')}`);

  // Boot 2: the live-applied deployment, with its files and the /etc edit made after it
  // (carried at boot: the crash skipped the shutdown's finalize); the cut apply undone
  // first; its deployment still staged. Then the reboot path: reboot (bench: its start).
  const b = await s.boot('e-after-cut', `${FNS}${observe('boot2')}r after-apply "$(cat /etc/live-test/after-apply 2>&1)"
r before-apply "$(cat /etc/live-test/before-apply 2>&1)"
r leftovers "$(ls -A ${SYSROOT}/live-apply 2>&1)"
r old-tree-mirror "$(grep -o 'mirror-[0-9]*' ${SYSROOT}/deploy/${old}/tree/${MIRROR} 2>&1)"
r old-tree-restart-conf "$(cat ${SYSROOT}/deploy/${old}/tree/${RESTART_CONF} 2>&1)"
r old-tree-undo "$(ls -A ${SYSROOT}/live-undo 2>&1 | tr '\\n' ' ')"
r boot-log "$(journalctl -b -u stagedroot-boot.service --no-pager -o cat 2>&1 | tr '\\n' ' ')"
r reboot-at "$(now)"
${REBOOT}`);
  s.clean(b, 'the boot after the power cut');
  s.rootIs(b, liveId, 'after the power cut');
  const stCut = decode(b.results.get('boot2-status'));
  s.eq(stCut?.booted, liveId, 'status.booted after the power cut');
  s.eq(stCut?.current, liveId, 'status.current after the power cut');
  s.eq(stCut?.activeLive, null, 'status.activeLive after the power cut');
  s.eq(stCut?.staged, cutId, 'status.staged after the power cut (the cut apply undone, its deployment left staged)');
  s.eq(b.results.get('after-apply'), 'edited after the live apply', 'the /etc edit made after the apply');
  s.eq(b.results.get('before-apply'), 'edited before the live apply', 'the /etc edit made between the stage and the apply (left to the carry by its merge of the update\'s own paths)');
  s.eq(b.results.get('boot2-key'), key(2).trim(), 'the SSH key after the power cut');
  s.eq(b.results.get('boot2-mirror'), 'mirror-2', 'the mirror after the power cut');
  s.eq(b.results.get('boot2-slow'), 'absent', 'the file the cut apply added');
  s.eq(b.results.get('boot2-restart-seen')?.split(' ')[1], 'v2', 'what the restarted service read at boot');
  s.eq(b.results.get('boot2-active'), 'active active active ', 'the services after the power cut');
  s.check(/No such file/.test(b.results.get('leftovers') ?? ''), `live-apply/ should be gone: ${b.results.get('leftovers')}`);
  s.check((b.results.get('boot-log') ?? '').includes(`undid the interrupted live apply of ${cutId}`), `the boot hook should say it undid the live apply of ${cutId}: ${b.results.get('boot-log')}`);
  // The rollback tree: the tree the first apply wrote into (the old deployment, now the
  // rollback) has its files as before the apply again, put back by the boot hook once
  // another deployment runs (docs/lifecycle.md, "The rollback tree").
  s.eq(b.results.get('old-tree-mirror'), 'mirror-1', "the old deployment's tree: the mirror as before the live apply");
  s.eq(b.results.get('old-tree-restart-conf'), 'v1', "the old deployment's tree: the restart file as before the live apply");

  // Boot 3: the staged one's reboot path: finalized at the shutdown, booted with its files.
  // Then a fourth config applied live (the mirror, the slow file removed), an /etc edit
  // after it, and a clean reboot: its shutdown finalize carries the edit.
  const c = await s.boot('e-reboot-path', `${FNS}r health-mono "$(systemctl show -P ActiveEnterTimestampMonotonic stagedroot-health.service)"; r now-up "$(cut -d' ' -f1 /proc/uptime)"; r now-real "$(now)"
${observe('boot3')}${spec({ label: 'e-live-2', files: [{ path: `/${MIRROR}`, contents: mirror(5) }], remove: [`/${SLOW}`] })}${stage('stage-e')}echo "edited before the second live apply" >/etc/live-test/before-apply-2
${applyLiveJson('live-e')}${observe('after-e')}
r prof-e "$(cat /run/prof/*.cpuprofile | gzip -c | base64 -w0)"
echo "edited after the second live apply" >/etc/live-test/after-apply-2
${REBOOT}`);
  s.clean(c, 'the boot of the reboot path');
  s.rootIs(c, cutId, 'the reboot path');
  s.eq(decode(c.results.get('boot3-status'))?.booted, cutId, 'status.booted on the reboot path');
  s.eq(c.results.get('boot3-mirror'), 'mirror-4', 'the mirror on the reboot path');
  s.eq(c.results.get('boot3-slow'), 'present', 'the file it added');
  s.eq(c.results.get('boot3-key'), key(4).trim(), 'the SSH key on the reboot path');
  s.eq(c.results.get('boot3-active'), 'active active active ', 'the services on the reboot path');
  const stageE = decode(c.results.get('stage-e'));
  const live2 = stageE?.id ?? null;
  s.eq(stageE?.activation?.mode, 'live', "the fourth config's activation.mode");
  s.eq(c.results.get('live-e-exit'), '0', `apply-live of the fourth config: exit code (${Buffer.from(c.results.get('live-e-err') ?? '', 'base64').toString().trim()})`);
  s.eq(c.results.get('after-e-mirror'), 'mirror-5', 'the mirror after the second live apply');
  s.eq(c.results.get('after-e-slow'), 'absent', 'the file the second live apply removes');
  // One Reload per changed path the policy names (the MCO keeps the duplicates): the mirror and the removed file.
  const reloads = stageE?.activation?.actions?.filter((x) => x.type === 'Reload').length ?? 0;
  s.eq(reloads, 2, "the fourth config's Reload actions");
  s.eq(c.results.get('after-e-reload-log'), 'reload mirror-5,'.repeat(reloads), "the reloaded service's reloads in that boot (each reading the new mirror)");
  s.eq(decode(c.results.get('status'))?.current, live2, 'status.current before the clean reboot');

  // Boot 4: after the clean reboot, the live-applied deployment with its files and the
  // edit made after it (carried by the shutdown's finalize); the tree it ran in (the
  // reboot path's) has its files back; then a rollback to it.
  const d = await s.boot('e-after-clean-reboot', `${FNS}${observe('boot4')}r after-apply-2 "$(cat /etc/live-test/after-apply-2 2>&1)"
r before-apply-2 "$(cat /etc/live-test/before-apply-2 2>&1)"
r prev-tree-mirror "$(grep -o 'mirror-[0-9]*' ${SYSROOT}/deploy/${cutId}/tree/${MIRROR} 2>&1)"
r prev-tree-slow "$(test -e ${SYSROOT}/deploy/${cutId}/tree/${SLOW} && echo present || echo absent)"
r rollback-exit "$(stagedroot rollback >/dev/console 2>&1; echo $?)"
${REBOOT}`);
  s.clean(d, 'the boot after the clean reboot that followed a live apply');
  s.rootIs(d, live2, 'after the clean reboot that followed a live apply');
  const st4 = decode(d.results.get('boot4-status'));
  s.eq(st4?.booted, live2, 'status.booted after the clean reboot');
  s.eq(st4?.activeLive, null, 'status.activeLive after the clean reboot');
  s.eq(d.results.get('boot4-mirror'), 'mirror-5', 'the mirror after the clean reboot');
  s.eq(d.results.get('boot4-slow'), 'absent', 'the removed file after the clean reboot');
  s.eq(d.results.get('after-apply-2'), 'edited after the second live apply', 'the /etc edit made after the second live apply (carried at the shutdown)');
  s.eq(d.results.get('before-apply-2'), 'edited before the second live apply', 'the /etc edit made between its stage and its apply (carried at the shutdown)');
  s.eq(d.results.get('boot4-active'), 'active active active ', 'the services after the clean reboot');
  s.eq(d.results.get('prev-tree-mirror'), 'mirror-4', "the reboot path's tree (now the rollback): the mirror as before the live apply");
  s.eq(d.results.get('prev-tree-slow'), 'present', "the reboot path's tree: the file the live apply removed, back");
  s.eq(d.results.get('rollback-exit'), '0', 'stagedroot rollback');

  // Boot 5: the rollback boots the reboot path's deployment with its own files, not the live-applied ones.
  const e = await s.boot('e-rollback', `${FNS}${observe('boot5')}systemctl --no-block poweroff
`);
  s.clean(e, 'the rollback boot');
  s.rootIs(e, cutId, 'the rollback after the live apply');
  s.eq(e.results.get('boot5-mirror'), 'mirror-4', 'the mirror after the rollback (as before the live apply)');
  s.eq(e.results.get('boot5-slow'), 'present', 'the file the live apply removed, after the rollback');
  s.eq(e.results.get('boot5-active'), 'active active active ', 'the services after the rollback');

  // The bench: from the end of the stage to the change being live, against the reboot
  // cycle that makes a staged config active (from `systemctl reboot` through finalize,
  // firmware and boot to the health service's start; guest clocks, set from the RTC at
  // each boot, so within a second).
  const steps = stepTimes(logA);
  const live = secs(a, 'stage-a-ended', 'live-a-ended');
  const healthAt = Number(c.results.get('now-real')) - Number(c.results.get('now-up')) + Number(c.results.get('health-mono')) / 1e6;
  const cycle = Number(c.results.get('health-mono')) > 0 && Number.isFinite(healthAt) ? healthAt - Number(b.results.get('reboot-at')) : null;
  s.figures = { liveSeconds: live, applyLiveSteps: steps, cliStartSeconds: secs(a, 'cli-start', 'cli-end'), nodeStartSeconds: secs(a, 'node-start', 'node-end'), versionSeconds: secs(a, 'version-start', 'version-end'), statusNoCacheSeconds: secs(a, 'nocache-start', 'nocache-end'), rebootCycleSeconds: cycle };
  if (a.results.get('prof-b')) fs.writeFileSync(`${env.out}/live-b.cpuprofile.gz`, Buffer.from(a.results.get('prof-b'), 'base64'));
  if (c.results.get('prof-e')) fs.writeFileSync(`${env.out}/live-e.cpuprofile.gz`, Buffer.from(c.results.get('prof-e'), 'base64'));
  if (live !== null && cycle !== null) {
    const firstStep = Math.min(...Object.values(steps));
    const stepText = Object.entries(steps).map(([k, t]) => `${k} +${(t - firstStep).toFixed(1)}`).join(', ');
    s.notes.push(`bench: stage end to live ${live.toFixed(2)} s (apply-live --health; steps at s from the first: ${stepText}; \`stagedroot status\` alone ${s.figures.cliStartSeconds?.toFixed(2)} s, without the code cache ${s.figures.statusNoCacheSeconds?.toFixed(2)} s, \`--version\` ${s.figures.versionSeconds?.toFixed(2)} s, \`node -e 0\` ${s.figures.nodeStartSeconds?.toFixed(2)} s) vs the reboot cycle ${cycle.toFixed(1)} s (finalize, firmware, boot to health): 1/${(cycle / live).toFixed(1)} (target <= 1/20: ${cycle / live >= 20 ? 'met' : 'MISSED'})`);
  } else s.check(false, `the bench figures are missing: live ${live}, cycle ${cycle}`);
  return s;
}
