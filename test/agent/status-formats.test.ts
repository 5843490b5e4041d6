import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { bootcHost } from '../../src/agent/bootc-host.js';
import { machineConfigNodeStatus, MCN_CONDITIONS, type McnStatus } from '../../src/agent/machine-config-node.js';
import type { Status } from '../../src/state/status.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

const schemas = (name: string): string => fileURLToPath(new URL(`../../fixtures/status-schemas/${name}`, import.meta.url));

/** Formats the two schemas use, checked (not ignored). */
const formats = {
  'date-time': /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/,
  int64: { type: 'number' as const, validate: (n: number) => Number.isInteger(n) },
  int32: { type: 'number' as const, validate: (n: number) => Number.isInteger(n) && Math.abs(n) < 2 ** 31 },
  uint32: { type: 'number' as const, validate: (n: number) => Number.isInteger(n) && n >= 0 && n < 2 ** 32 },
};

/**
 * Kubernetes prunes fields a CRD does not declare: a status with such a field would lose it
 * silently. Here every object schema with properties is closed, so such a field fails.
 */
function closed(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(closed);
  if (typeof s !== 'object' || s === null) return s;
  const o = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, x]) => [p, closed(x)])) : closed(v)]));
  if (o.type === 'object' && o.properties && o.additionalProperties === undefined) o.additionalProperties = false;
  return o;
}

let mcn: ValidateFunction;
let host: ValidateFunction;
beforeAll(() => {
  const crd = parse(fs.readFileSync(schemas('machineconfignodes-SelfManagedHA-Default.crd.yaml'), 'utf8')) as { spec: { versions: { name: string; schema: { openAPIV3Schema: { properties: { status: unknown } } } }[] } };
  const v1 = crd.spec.versions.find((v) => v.name === 'v1')!;
  mcn = new Ajv({ strict: false, allErrors: true, formats }).compile(closed(v1.schema.openAPIV3Schema.properties.status) as object);
  host = new Ajv2020({ strict: false, allErrors: true, formats }).compile(JSON.parse(fs.readFileSync(schemas('bootc-host-v1.schema.json'), 'utf8')));
});

const valid = (v: ValidateFunction, doc: unknown): void => {
  v(doc);
  expect(v.errors ?? [], JSON.stringify(doc)).toEqual([]);
};

const conditionsOf = (s: McnStatus): Record<string, string> => Object.fromEntries(s.conditions.map((c) => [c.type, c.status]));

describe('status formats validated against the upstream schemas', () => {
  let t: TempSysroot;
  const seen: Status[] = [];
  const snap = (): Status => {
    const s = t.sysroot.status();
    seen.push(s);
    return s;
  };
  beforeAll(async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' }, label: 'rendered-worker-1' });
  });
  afterAll(() => t?.cleanup());

  it('the schemas catch what they should (a condition without a reason, an unknown field, a bad BootEntry)', () => {
    expect(mcn({ configVersion: { desired: 'x' }, conditions: [{ type: 'Updated', status: 'True', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] })).toBe(false);
    expect(mcn({ configVersion: { desired: 'x' }, extra: 1 })).toBe(false);
    expect(mcn({ configVersion: { desired: 'x' }, conditions: [{ type: 'Updated', status: 'Yes', reason: 'Updated', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] })).toBe(false);
    expect(host({ apiVersion: 'org.containers.bootc/v1', kind: 'BootcHost', status: { booted: { pinned: false } } })).toBe(false);
  });

  it('walks a node through an update; every MachineConfigNode status and BootcHost validates, conditions as expected', async () => {
    const desired = 'rendered-worker-2';
    let s = snap();
    expect(conditionsOf(machineConfigNodeStatus(s, desired))).toEqual(Object.fromEntries(MCN_CONDITIONS.map((c) => [c, 'False'])));
    expect(machineConfigNodeStatus(s, 'rendered-worker-1').conditions.find((c) => c.type === 'Updated')?.status).toBe('True');

    const staged = await t.sysroot.stage({ label: desired, files: [{ path: '/etc/kubelet.conf', contents: 'a\n' }] });
    s = snap();
    let m = machineConfigNodeStatus(s, desired);
    expect(conditionsOf(m)).toMatchObject({ UpdatePrepared: 'True', UpdateExecuted: 'True', AppliedFilesAndOS: 'True', UpdatePostActionComplete: 'False', RebootedNode: 'False', Updated: 'False' });
    expect(m.conditions.find((c) => c.type === 'UpdateExecuted')?.lastTransitionTime).toBe(s.deployments.find((d) => d.id === staged.id)!.createdAt);
    expect(m.configVersion).toEqual({ current: 'rendered-worker-1', desired });
    expect(bootcHost(s).status.staged).not.toBeNull();

    await t.sysroot.finalize();
    s = snap();
    m = machineConfigNodeStatus(s, desired, { previous: m });
    expect(conditionsOf(m)).toMatchObject({ UpdatePostActionComplete: 'True', RebootedNode: 'False' });
    expect(bootcHost(s).status.staged, 'finalized, waiting for the reboot: still bootc\'s staged').not.toBeNull();

    await t.sysroot.boot();
    s = snap();
    const rebootedAt = new Date('2030-01-01T00:00:00Z');
    m = machineConfigNodeStatus(s, desired, { previous: m, now: () => rebootedAt });
    expect(conditionsOf(m)).toMatchObject({ RebootedNode: 'True', UpdateComplete: 'False', Updated: 'False' });
    expect(m.conditions.find((c) => c.type === 'RebootedNode')?.lastTransitionTime).toBe(rebootedAt.toISOString());
    await t.sysroot.markGood();
    s = snap();
    const later = machineConfigNodeStatus(s, desired, { previous: m, now: () => new Date('2031-01-01T00:00:00Z') });
    expect(conditionsOf(later)).toMatchObject({ RebootedNode: 'True', Resumed: 'True', UpdateComplete: 'True', Updated: 'True', NodeDegraded: 'False' });
    // Unchanged since the previous report: the time of the transition is kept.
    expect(later.conditions.find((c) => c.type === 'RebootedNode')?.lastTransitionTime).toBe(rebootedAt.toISOString());
    expect(bootcHost(s).status.rollback).not.toBeNull();

    await t.sysroot.stage({ label: 'rendered-worker-3', files: [{ path: '/etc/a', contents: 'x', mode: '0666' }] }).catch(() => {});
    s = snap();
    m = machineConfigNodeStatus(s, 'rendered-worker-3');
    const degraded = m.conditions.find((c) => c.type === 'NodeDegraded')!;
    expect(degraded).toMatchObject({ status: 'True', reason: 'ValidationFailed', lastTransitionTime: s.lastFailure!.at });
    expect(degraded.message).toContain('world-writable');

    await t.sysroot.rollback();
    s = snap();
    expect(bootcHost(s).status.rollbackQueued).toBe(true);
    expect(bootcHost(s).spec.bootOrder).toBe('rollback');

    for (const st of seen) {
      for (const d of ['rendered-worker-1', desired, 'rendered-worker-3']) valid(mcn, machineConfigNodeStatus(st, d));
      valid(host, bootcHost(st));
    }
  });

  it('`status --format machine-config-node|bootc` print them; other formats are usage errors', async () => {
    const a = await cli(['status', '--format', 'machine-config-node', '--desired-config', 'rendered-worker-2', '--sysroot', t.dir]);
    expect(a.code, a.err).toBe(0);
    valid(mcn, JSON.parse(a.out));
    expect(JSON.parse(a.out).configVersion.desired).toBe('rendered-worker-2');
    const b = await cli(['status', '--format', 'bootc', '--sysroot', t.dir]);
    expect(b.code, b.err).toBe(0);
    valid(host, JSON.parse(b.out));
    expect((await cli(['status', '--format', 'yaml', '--sysroot', t.dir])).code).toBe(2);
  });
});

describe('an image deployment in BootcHost', () => {
  it('carries its image reference, digest, architecture and version', () => {
    const s = {
      sysroot: '/s', booted: '0002', current: '0002', staged: null, rollback: null, pendingReboot: false, activeLive: null, bootedByChoice: false, finalizationLocked: false, lastFailure: null, finalizeFailure: null, bootTries: 3, storage: 'portable', shared: {}, merged: ['etc'], lastMerge: null,
      deployments: [{ id: '0002', label: '9.6', path: '/s/deploy/0002/tree', createdAt: '2026-01-01T00:00:00.000Z', parent: '0001', status: 'ready', failed: false, good: true, triesLeft: null, pinned: false, locked: false, booted: true, current: true, staged: false, rollback: false, entries: 1, healthChecks: 0, kernelArguments: [], origin: { kind: 'oci-image', digest: 'sha256:' + 'a'.repeat(64), mediaType: 'application/vnd.oci.image.manifest.v1+json', labels: { 'org.opencontainers.image.version': '9.6' }, ref: 'quay.io/os:9.6', platform: 'linux/arm64' }, failure: null }],
    } satisfies Status;
    const h = bootcHost(s);
    valid(host, h);
    expect(h.status.booted?.image).toEqual({ image: { image: 'quay.io/os:9.6', transport: 'oci' }, imageDigest: 'sha256:' + 'a'.repeat(64), architecture: 'arm64', version: '9.6', timestamp: null });
    expect(h.spec.image).toEqual({ image: 'quay.io/os:9.6', transport: 'oci' });
  });
});
