import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configureFleetLock, FleetLockClient, fleetLockOf, isStagedrootError, machineConfigNodeStatus, mcdAnnotations, rebootWithSlot, releaseSlot, sourceFromPath, type McnStatus, type Status } from '../../src/index.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { LockServer } from '../fleetlock/lock-server.js';
import { fixture, NODE_TREE } from '../sources/machine-config/machine-config-helpers.js';

/**
 * The agent loop of docs/agent.md, run: rendered MachineConfigs staged as they come, the
 * MachineConfigNode status reported, reboots taken through a FleetLock slot, the slot
 * released once the boot is good. The "cluster" is a few functions and a lock server.
 */
describe('the agent loop of docs/agent.md', () => {
  let t: TempSysroot;
  let server: LockServer;
  beforeAll(async () => {
    t = await tempSysroot({ tree: NODE_TREE });
    server = await new LockServer(1).start();
    await configureFleetLock(t.dir, { url: server.url, group: 'workers', id: 'worker-0' });
  });
  afterAll(async () => {
    await server.stop();
    t?.cleanup();
  });

  it('takes a node from rendered-worker-1 to rendered-worker-2, one slot at a time', async () => {
    const sysroot = t.sysroot;
    const reports: McnStatus[] = [];
    let rebootAsked = 0;
    const cluster = {
      desired: '',
      renderedConfigFile: (name: string) => fixture(`rendered-worker-${name === nameOf(2) ? 2 : 1}.yaml`),
      writeMachineConfigNodeStatus: async (s: McnStatus) => void reports.push(s),
      reboot: async () => void rebootAsked++,
    };
    const services = { command: ['sh', path.join(import.meta.dirname, '../helpers/fake-systemctl.sh'), path.join(t.scratch, 'systemctl.log')] };
    const nameOf = (n: 1 | 2): string => (JSON.parse(fs.readFileSync(fixture(`rendered-worker-${n}.json`), 'utf8')) as { metadata: { name: string } }).metadata.name;

    // --- the loop, as in docs/agent.md ---
    let reported: McnStatus | undefined;
    const holding = (s: Status, config: string) => s.deployments.find((d) => d.label === config && !d.failed && (d.staged || d.current || d.booted));
    async function reconcile(): Promise<void> {
      const desired = cluster.desired;
      let status = sysroot.status();
      if (!holding(status, desired) && status.lastFailure?.label !== desired) {
        try {
          await sysroot.stage(sourceFromPath(cluster.renderedConfigFile(desired)));
        } catch (err) {
          if (!isStagedrootError(err) || !err.isRejection) throw err;
        }
        status = sysroot.status();
      }
      reported = machineConfigNodeStatus(status, desired, { previous: reported });
      await cluster.writeMachineConfigNodeStatus(reported);
      const staged = status.deployments.find((d) => d.staged);
      if (staged?.label === desired && !status.finalizationLocked) {
        if (staged.activation?.mode === 'live') {
          try {
            await sysroot.applyLive({ services });
            await cluster.writeMachineConfigNodeStatus((reported = machineConfigNodeStatus(sysroot.status(), desired, { previous: reported })));
            return;
          } catch (err) {
            if (!isStagedrootError(err, 'LIVE_ACTION_FAILED')) throw err;
          }
        }
        const r = await rebootWithSlot(status, { fleetLock: fleetLockOf(t.dir), reboot: cluster.reboot });
        if (r.action === 'no-slot') return; // stays staged; the next round asks again
      }
    }
    const other = new FleetLockClient({ url: server.url, group: 'workers', id: 'worker-1' });
    // --- what the host units do at shutdown and boot ---
    const hostReboot = async (): Promise<void> => {
      await sysroot.finalize();
      await sysroot.boot();
      await sysroot.markGood();
      const lock = fleetLockOf(t.dir);
      if (lock) await releaseSlot(lock); // stagedroot health does this after marking good
    };

    for (const n of [1, 2] as const) {
      cluster.desired = nameOf(n);
      await other.preReboot(); // another node of the pool is rebooting
      const before = rebootAsked;
      await reconcile();
      expect(rebootAsked, 'no slot: no reboot').toBe(before);
      expect(sysroot.status().staged, JSON.stringify(sysroot.status().lastFailure)).not.toBeNull();
      await other.steadyState();
      await reconcile();
      expect(rebootAsked).toBe(before + 1);
      expect([...server.holders.get('workers')!]).toEqual(['worker-0']);
      await hostReboot();
      expect([...server.holders.get('workers')!]).toEqual([]);
      await reconcile();
      expect(reported!.conditions.find((c) => c.type === 'Updated')?.status).toBe('True');
      expect(reported!.configVersion).toEqual({ current: cluster.desired, desired: cluster.desired });
    }
    const booted = sysroot.treePath(sysroot.status().booted!);
    expect(fs.readFileSync(path.join(booted, 'etc/chrony.conf'), 'utf8')).toBe('pool 2.rhel.pool.ntp.org iburst\n');
    expect(fs.lstatSync(path.join(booted, 'etc/systemd/system/node-report.service'), { throwIfNoEntry: false })).toBeUndefined();
    expect(reports.length).toBe(6);

    // A config that changes only what a policy covers (the CRI-O signature policy): applied live, no reboot, no slot.
    const mc = JSON.parse(fs.readFileSync(fixture('rendered-worker-2.json'), 'utf8')) as { metadata: { name: string }; spec: { config: { storage: { files: { path: string; contents?: { source: string } }[] } } } };
    mc.metadata.name = 'rendered-worker-live';
    const policy = mc.spec.config.storage.files.find((f) => f.path === '/etc/containers/policy.json')!;
    policy.contents = { source: `data:,${encodeURIComponent('{"default":[{"type":"reject"}]}')}` };
    const liveFile = path.join(t.scratch, 'rendered-worker-live.json');
    fs.writeFileSync(liveFile, JSON.stringify(mc));
    cluster.renderedConfigFile = () => liveFile;
    cluster.desired = 'rendered-worker-live';
    await other.preReboot(); // no slot free: a live apply needs none
    const asked = rebootAsked;
    await reconcile();
    expect(rebootAsked).toBe(asked);
    expect(sysroot.status()).toMatchObject({ staged: null, pendingReboot: false, activeLive: { deployment: sysroot.status().current } });
    expect(reported!.conditions.filter((c) => c.status === 'True').map((c) => c.type)).toEqual(['UpdatePrepared', 'UpdateExecuted', 'AppliedFilesAndOS', 'UpdatePostActionComplete', 'Resumed', 'UpdateComplete', 'Updated']);
    expect(reported!.configVersion).toEqual({ current: 'rendered-worker-live', desired: 'rendered-worker-live' });
    expect(mcdAnnotations(sysroot.status(), 'rendered-worker-live')['machineconfiguration.openshift.io/state']).toBe('Done');
    expect(fs.readFileSync(path.join(t.scratch, 'systemctl.log'), 'utf8')).toBe('reload crio.service\n');
    await other.steadyState();
  });
});
