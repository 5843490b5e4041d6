import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reboot, tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { readConfigRecord } from '../../../src/store/config-record.js';
import { cli } from '../../helpers/cli.js';
import { fixture, NODE_TREE } from '../machine-config/machine-config-helpers.js';

const CHRONY = 'etc/chrony.conf';
const UNIT = 'etc/systemd/system/node-report.service';
const DROPIN_DIR = 'etc/systemd/system/node-report.service.d';
const WANTS = 'etc/systemd/system/multi-user.target.wants/node-report.service';
const BASE_CHRONY = 'pool 2.rhel.pool.ntp.org iburst\n';
/** Whether anything is at a path (a dangling link too: enablement links point at /etc/…, absolute). */
const present = (p: string): boolean => fs.lstatSync(p, { throwIfNoEntry: false }) !== undefined;

/** Three rendered configs in a row: the second drops a file (the chrony one) and a unit (enabled, with a drop-in). */
describe('configs own their files: rendered-worker-1, -2, -3 in a row', () => {
  let t: TempSysroot;
  const ids: string[] = [];
  const tree = (id: string, p: string): string => path.join(t.sysroot.treePath(id), p);
  beforeAll(async () => {
    t = await tempSysroot({ tree: NODE_TREE });
  });
  afterAll(() => t?.cleanup());

  it('1 records what it owns, with the base image\'s version of the paths it overwrote', async () => {
    const r = await t.sysroot.stage(fixture('rendered-worker-1.yaml'));
    ids.push(r.id);
    const rec = readConfigRecord(path.dirname(r.path))!;
    expect(rec.name).toBe(r.label);
    const byPath = new Map(rec.owned.map((o) => [`${o.kind}:${o.path}`, o]));
    expect(byPath.get(`file:${CHRONY}`)?.original).toEqual({ type: 'file', mode: 0o644, uid: expect.any(Number), gid: expect.any(Number), data: Buffer.from(BASE_CHRONY).toString('base64') });
    expect(byPath.get(`unit:${UNIT}`)?.original).toBeNull();
    expect(byPath.get(`dropin:${DROPIN_DIR}/10-env.conf`)?.original).toBeNull();
    expect(byPath.get(`directory:${DROPIN_DIR}`)?.original).toBeNull(); // created to hold the drop-in
    expect(byPath.get('enabled:node-report.service')).toMatchObject({ wasEnabled: false });
    expect(fs.readlinkSync(tree(r.id, WANTS))).toBe(`/${UNIT}`);
    await reboot(t.sysroot);
  });

  it('2 leaves neither the file nor the unit behind: the base version restored, the unit, drop-in, its directory and link deleted', async () => {
    const dry = await cli(['stage', fixture('rendered-worker-2.yaml'), '--dry-run', '--json', '--sysroot', t.dir]);
    expect(dry.code, dry.out + dry.err).toBe(0);
    const planned = JSON.parse(dry.out) as { changes: { path: string; change: string }[] };
    expect(planned.changes).toEqual(expect.arrayContaining([
      { path: CHRONY, change: 'modified', what: ['content'] },
      expect.objectContaining({ path: UNIT, change: 'removed' }),
      expect.objectContaining({ path: `${DROPIN_DIR}/10-env.conf`, change: 'removed' }),
      expect.objectContaining({ path: DROPIN_DIR, change: 'removed' }),
      expect.objectContaining({ path: WANTS, change: 'removed' }),
    ]));

    const r = await t.sysroot.stage(fixture('rendered-worker-2.yaml'));
    ids.push(r.id);
    expect(fs.readFileSync(tree(r.id, CHRONY), 'utf8')).toBe(BASE_CHRONY);
    expect(fs.statSync(tree(r.id, CHRONY)).mode & 0o7777).toBe(0o644);
    for (const p of [UNIT, DROPIN_DIR, WANTS]) expect(present(tree(r.id, p)), p).toBe(false);
    // What the templates still write stays.
    expect(present(tree(r.id, 'etc/systemd/system/kubelet-cleanup.service'))).toBe(true);
    expect(fs.readlinkSync(tree(r.id, 'etc/systemd/system/multi-user.target.wants/kubelet-cleanup.service'))).toBe('/etc/systemd/system/kubelet-cleanup.service');
    // The stage's result lists what it wrote (the restored file); deploy/ID/delta.json has the removals too.
    expect(r.delta).toContain(CHRONY);
    const delta = JSON.parse(fs.readFileSync(path.join(path.dirname(r.path), 'delta.json'), 'utf8')) as { changed: { p: string }[]; removed: string[] };
    expect(delta.changed.map((e) => e.p)).toContain(CHRONY);
    expect(delta.removed).toEqual(expect.arrayContaining([UNIT, `${DROPIN_DIR}/10-env.conf`, DROPIN_DIR, WANTS]));
    const diff = await t.sysroot.diff(ids[0]!, r.id);
    expect(diff.map((c) => `${c.change} ${c.path}`)).toEqual(expect.arrayContaining([`modified ${CHRONY}`, `removed ${UNIT}`, `removed ${DROPIN_DIR}`, `removed ${WANTS}`]));
    expect(readConfigRecord(path.dirname(r.path))!.owned.some((o) => o.path === CHRONY || o.path === UNIT)).toBe(false);
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    await reboot(t.sysroot);
  });

  it('3 writes the file again; dropping it once more restores the base image\'s version, not config 1\'s', async () => {
    const r = await t.sysroot.stage(fixture('rendered-worker-3.yaml'));
    ids.push(r.id);
    expect(fs.readFileSync(tree(r.id, CHRONY), 'utf8')).toContain('pool 0.rhel.pool.ntp.org iburst');
    expect(present(tree(r.id, UNIT))).toBe(false);
    await reboot(t.sysroot);
    const again = await t.sysroot.stage(fixture('rendered-worker-2.yaml'));
    expect(fs.readFileSync(tree(again.id, CHRONY), 'utf8')).toBe(BASE_CHRONY);
  });
});

describe('a path both owned by the config and edited locally', () => {
  it('is let go as the config says; finalize keeps the local edit aside and reports it in lastMerge', async () => {
    const t = await tempSysroot({ tree: NODE_TREE });
    try {
      await t.sysroot.stage(fixture('rendered-worker-1.yaml'));
      await reboot(t.sysroot);
      const booted = t.sysroot.status().booted!;
      fs.writeFileSync(path.join(t.sysroot.treePath(booted), CHRONY), 'server local.example iburst\n'); // an admin's edit of the running /etc
      await t.sysroot.stage(fixture('rendered-worker-2.yaml'));
      await reboot(t.sysroot);
      const s = t.sysroot.status();
      const now = path.join(t.sysroot.treePath(s.booted!), CHRONY);
      const conflict = s.lastMerge?.conflicts.find((c) => c.path === CHRONY);
      expect(fs.readFileSync(now, 'utf8')).toBe(BASE_CHRONY);
      expect(conflict?.kept).toBeTruthy();
      expect(fs.readFileSync(conflict!.kept!, 'utf8')).toBe('server local.example iburst\n');
    } finally {
      t.cleanup();
    }
  });
});
