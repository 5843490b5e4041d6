// The real-boot scenarios after the adoption: each continues on the machine the one
// before left. Numbered as run.mjs numbers them (STAGEDROOT_BOOT_SCENARIOS): 1 the adoption
// (adopt.mjs), 2 the update keeping /var and /etc writes, 3 the kernel update (kernel.mjs),
// 4 the bad updates falling back, 5 the power cut, 6 the UEFI machine (uefi.mjs), 7 apply-live
// on the UEFI machine (live.mjs), 8 an OS update from a registry in the guest, on the GRUB
// machine (registry.mjs).
import * as fs from 'node:fs';
import { adoptThroughGrub } from './adopt.mjs';
import { kernelUpdateThroughGrub } from './kernel.mjs';
import { liveApplyOnUefi } from './live.mjs';
import { updateFromRegistry } from './registry.mjs';
import { uefiSystemdBoot } from './uefi.mjs';
import { POWEROFF, REBOOT, STAGE, SYSROOT, Scenario, decode, dep, spec } from './scenario.mjs';

/** 1. Stage from inside, write /var and /etc after the stage, reboot: the new root, both writes kept. */
export async function updateKeepsLocalWrites(env) {
  const s = new Scenario('a staged update boots; /var and /etc written after the stage survive; health passes; marked good', env);
  const a = await s.boot('s1-stage', `${spec({ label: 's1-update', files: [{ path: '/etc/s1-update', contents: 'from the update\n' }] })}${STAGE}
echo "written after the stage" >/var/lib/s1-after-stage
echo "edited after the stage" >/etc/s1-local-edit
${REBOOT}`);
  s.clean(a, 'stage boot');
  s.eq(a.results.get('stage-exit'), '0', 'stagedroot stage exit code');
  const staged = a.status?.staged ?? null;
  s.check(staged !== null, 'the stage left nothing staged');
  const b = await s.boot('s1-new-root', `r var "$(cat /var/lib/s1-after-stage 2>&1)"
r etc "$(cat /etc/s1-local-edit 2>&1)"
r update "$(cat /etc/s1-update 2>&1)"
r health "$(systemctl is-active stagedroot-health.service)"
r usr "$(touch /usr/s1-probe 2>/dev/null && echo writable || echo read-only)"
${POWEROFF}`);
  s.clean(b, 'boot after the update');
  s.rootIs(b, staged, 'after the reboot');
  s.eq(b.results.get('var'), 'written after the stage', '/var write after the stage');
  s.eq(b.results.get('etc'), 'edited after the stage', '/etc edit after the stage');
  s.eq(b.results.get('update'), 'from the update', 'the update\'s file');
  s.eq(b.results.get('health'), 'active', 'stagedroot-health.service');
  s.eq(b.results.get('usr'), 'read-only', '/usr');
  s.eq(b.status?.booted, staged, 'status.booted');
  s.eq(b.status?.current, staged, 'status.current');
  s.eq(dep(b.status, staged)?.good, true, 'the new deployment marked good');
  return s;
}

/** 2. A failing health check marks it bad and the next boot is the last good one; one that dies before the boot hook falls back from the initramfs. */
export async function badUpdatesFallBack(env) {
  const s = new Scenario('a failing health check rolls back; (c) a deployment that dies before the boot hook falls back after its tries, through GRUB', env);
  const a = await s.boot('s2-stage-bad-health', `${spec({ label: 's2-bad-health', files: [{ path: '/etc/stagedroot/health/required.d/50-fails', contents: '#!/bin/sh\necho "this check fails on purpose"\nexit 1\n', mode: '0755' }] })}${STAGE}${REBOOT}`);
  s.clean(a, 'stage boot');
  s.eq(a.results.get('stage-exit'), '0', 'stage exit code');
  const good = a.status?.booted ?? null;
  const bad = a.status?.staged ?? null;
  const b = await s.boot('s2-bad-health', `r health "$(systemctl is-active stagedroot-health.service)"\n${REBOOT}`);
  s.clean(b, 'boot of the bad deployment');
  s.rootIs(b, bad, 'the bad deployment boots once');
  s.eq(b.results.get('health'), 'failed', 'stagedroot-health.service');
  s.eq(b.status?.current, good, 'current after mark-bad');
  s.eq(b.status?.lastFailure?.phase, 'health', 'lastFailure.phase');
  const c = await s.boot('s2-back-to-good', `${spec({ label: 's2-dies-early', remove: ['/usr/sbin/init'], files: [{ path: '/usr/sbin/init', contents: '#!/bin/sh\necho "stagedroot-test: this init dies before the boot hook"\nexit 1\n', mode: '0755' }] })}${STAGE}${REBOOT}`);
  s.clean(c, 'boot after mark-bad');
  s.rootIs(c, good, 'the next boot');
  s.eq(c.results.get('stage-exit'), '0', 'stage of the init that dies');
  const dies = c.status?.staged ?? null;
  const tries = c.status?.bootTries ?? 3;
  let failedBoots = 0;
  let d;
  for (let i = 0; i <= tries; i++) {
    d = await s.boot(`s2-dies-${i + 1}`, `r menu-default "$(grep -o -- '--id stagedroot-[0-9]*' /sysroot/boot/grub/${GRUB_MENU} | head -n 1)"\n${POWEROFF}`);
    if (d.results.has('root')) break;
    failedBoots++;
    const text = fs.readFileSync(d.consoleLog, 'utf8');
    s.check(text.includes(`booting deployment ${dies}`), `failed boot ${i + 1}: prepare-root did not boot deployment ${dies}`);
    s.check(text.includes('this init dies before the boot hook'), `failed boot ${i + 1}: the broken init did not run`);
    s.needs(text.includes(`stagedroot.deployment=${dies}`), 'bootlib: GRUB menu of the deployments', `failed boot ${i + 1}: GRUB should boot deployment ${dies}'s entry (stagedroot.deployment=${dies})`);
  }
  s.eq(failedBoots, tries, 'boots of the deployment that dies before the boot hook');
  s.clean(d, 'fallback boot');
  s.rootIs(d, good, 'after the tries are used');
  s.check((d.results.get('record') ?? '').includes(`fell-back-from=${dies}`), `the initramfs record should say it fell back from ${dies}: ${d.results.get('record')}`);
  s.eq(d.status?.current, good, 'current after the fallback');
  s.eq(d.status?.lastFailure?.id, dies, 'lastFailure.id');
  s.eq(d.status?.lastFailure?.phase, 'boot', 'lastFailure.phase');
  s.check(/did not reach the boot hook in \d+ tries/.test(d.status?.lastFailure?.reason ?? ''), `lastFailure.reason should say it did not reach the boot hook: ${d.status?.lastFailure?.reason}`);
  // (c) through the bootloader: GRUB still booted the broken deployment's entry (it was
  // the default); the initramfs fell back; the boot hook then made the good one GRUB's default.
  s.needs((d.results.get('cmdline') ?? '').includes(`stagedroot.deployment=${dies}`), 'bootlib: GRUB menu of the deployments', `the fallback boot should come from deployment ${dies}'s entry: ${d.results.get('cmdline')}`);
  s.needs(d.results.get('menu-default') === `--id stagedroot-${good}`, 'bootlib: GRUB menu of the deployments', `GRUB's default entry after the fallback should be deployment ${good}'s: ${d.results.get('menu-default')}`);
  return s;
}

/** 3. A power cut during a stage: the next boot is the old deployment, recovery cleans up, the next stage works. */
export async function powerCutDuringStage(env) {
  const s = new Scenario('a power cut in the middle of a stage: old deployment boots, leftovers removed, the next stage works', env);
  const a = await s.boot('s3-power-cut', `${spec({ label: 's3-cut', files: [{ path: '/etc/s3', contents: 'x\n' }] })}
r before "$(st)"
stagedroot stage /run/spec.json >/dev/null 2>&1 &
while [ -z "$(ls -A ${SYSROOT}/work 2>/dev/null)" ]; do sleep 0.05; done
sleep 1
r cut "$(ls ${SYSROOT}/work | tr '\\n' ' ')"
sleep 600
`, { killOn: 'cut' });
  s.eq(a.ended, 'power-cut', 'the stage boot');
  const before = decode(a.results.get('before'));
  const old = before?.booted ?? null;
  const b = await s.boot('s3-after-cut', `r leftovers "$(ls -A ${SYSROOT}/work ${SYSROOT}/trash 2>/dev/null | grep -v '^/\\|^$' | tr '\\n' ' ')"
r boot-log "$(journalctl -b -u stagedroot-boot.service --no-pager -o cat 2>&1 | tr '\\n' ' ')"
r before "$(st)"
${spec({ label: 's3-after', files: [{ path: '/etc/s3', contents: 'y\n' }] })}${STAGE}${POWEROFF}`);
  s.clean(b, 'boot after the power cut');
  s.rootIs(b, old, 'after the power cut');
  const after = decode(b.results.get('before'));
  s.eq(after?.staged, null, 'staged after the power cut (the stage must not have finished)');
  s.eq(after?.current, old, 'current after the power cut');
  s.eq((b.results.get('leftovers') ?? 'missing').trim(), '', 'leftovers in work/ and trash/');
  s.check((b.results.get('boot-log') ?? '').includes('recovery: removed leftovers in work/'), `the boot hook's recovery should remove the interrupted stage: ${b.results.get('boot-log')}`);
  s.eq(b.results.get('stage-exit'), '0', 'the next stage');
  s.check(b.status?.staged != null, 'the next stage left something staged');
  return s;
}

/** stagedroot.cfg: bootlib's GRUB menu of the deployments, beside grub.cfg on the physical root. */
const GRUB_MENU = 'stagedroot.cfg';

export const SCENARIOS = [adoptThroughGrub, updateKeepsLocalWrites, kernelUpdateThroughGrub, badUpdatesFallBack, powerCutDuringStage, uefiSystemdBoot, liveApplyOnUefi, updateFromRegistry];
