/* eslint-disable @typescript-eslint/no-explicit-any -- MachineConfig documents are edited here as plain JSON */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { StagedrootError } from '../../../src/errors.js';
import { machineConfigSource } from '../../../src/sources/machine-config/index.js';
import { splitKernelArguments } from '../../../src/sources/machine-config/kernel-args.js';
import { detectKind } from '../../../src/sources/detect.js';
import { applyKernelArguments } from '../../../src/state/kernel-args.js';
import { hashTree, reboot, tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { filesOf, fixture, NODE_TREE, renderedDoc } from './machine-config-helpers.js';
// @ts-expect-error: a plain .mjs script without types
import { renderAll } from '../../../fixtures/machine-config/render.mjs';

describe('the rendered MachineConfig fixtures', () => {
  it('are what fixtures/machine-config/render.mjs renders from the copied MCO templates', () => {
    const all = renderAll() as Record<string, unknown>;
    expect(Object.keys(all)).toEqual(['rendered-worker-1', 'rendered-worker-2', 'rendered-worker-3']);
    for (const [name, doc] of Object.entries(all)) {
      expect(JSON.parse(fs.readFileSync(fixture(`${name}.json`), 'utf8'))).toEqual(doc);
      expect(renderedDoc(Number(name.slice(-1)) as 1 | 2 | 3)).toEqual(doc);
    }
  });

  it('are detected as MachineConfigs, YAML and JSON alike', () => {
    expect(detectKind(fixture('rendered-worker-1.yaml'))).toBe('machine-config');
    expect(detectKind(fixture('rendered-worker-1.json'))).toBe('machine-config');
  });
});

describe('kernel arguments as the machine-config-daemon applies them', () => {
  it('splits entries on spaces outside double quotes', () => {
    expect(splitKernelArguments('  a=1   b="x y"\tc ')).toEqual(['a=1', 'b="x y"', 'c']);
  });

  it('deletes one occurrence of each previous argument, then appends the new ones, duplicates kept', () => {
    expect(applyKernelArguments(['quiet', 'y=0', 'z=4', 'y=1', 'z=4'], { deleteIfPresent: ['y=0', 'z=4', 'y=1', 'z=4', 'gone=1'], append: ['a=1', 'a=1'] })).toEqual(['quiet', 'a=1', 'a=1']);
    expect(applyKernelArguments(['quiet'], { deleteIfPresent: [], append: ['y=0', 'z=4', 'y=1', 'z=4'] })).toEqual(['quiet', 'y=0', 'z=4', 'y=1', 'z=4']);
  });
});

describe('`stagedroot stage` of rendered MachineConfigs', () => {
  let t: TempSysroot;
  beforeAll(async () => {
    t = await tempSysroot({ tree: NODE_TREE, kernelArguments: ['root=UUID=abc', 'rw'] });
  });
  afterAll(() => t?.cleanup());

  it('stages rendered-worker-1.yaml: every file with its bytes and mode, units, kernel arguments in order', async () => {
    const r = await cli(['stage', fixture('rendered-worker-1.yaml'), '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(0);
    const out = JSON.parse(r.out) as { id: string; label: string; path: string; warnings: { code: string; path: string }[] };
    const doc = renderedDoc(1);
    expect(out.label).toBe(doc.metadata.name);
    // No image store: the image the config names is not applied, and that is said.
    expect(out.warnings).toContainEqual(expect.objectContaining({ code: 'OS_IMAGE_NOT_APPLIED', path: 'spec.osImageURL' }));
    const files = filesOf(doc);
    expect(files.size).toBeGreaterThanOrEqual(12);
    for (const [p, f] of files) {
      expect(fs.readFileSync(path.join(out.path, p)), p).toEqual(f.data);
      expect(fs.statSync(path.join(out.path, p)).mode & 0o7777, p).toBe(f.mode);
    }
    expect(fs.readFileSync(path.join(out.path, 'etc/chrony.conf'), 'utf8')).toContain('pool 0.rhel.pool.ntp.org iburst');
    const unitDir = path.join(out.path, 'etc/systemd/system');
    expect(fs.readFileSync(path.join(unitDir, 'node-report.service.d/10-env.conf'), 'utf8')).toBe('[Service]\nEnvironment=REPORT=1\n');
    expect(fs.readlinkSync(path.join(unitDir, 'multi-user.target.wants/node-report.service'))).toBe('/etc/systemd/system/node-report.service');
    expect(fs.readlinkSync(path.join(unitDir, 'multi-user.target.wants/kubelet-cleanup.service'))).toBe('/etc/systemd/system/kubelet-cleanup.service');
    expect(fs.readFileSync(path.join(unitDir, 'zincati.service.d/mco-disabled.conf'), 'utf8')).toContain('ConditionPathExists=/enoent');
    const d = t.sysroot.status().deployments.find((x) => x.id === out.id)!;
    expect(d.kernelArguments).toEqual(['root=UUID=abc', 'rw', 'y=0', 'z=4', 'y=1', 'z=4']);
    expect((await t.sysroot.verify(out.id)).drift).toEqual([]);
  });

  it('stages the JSON form to the same tree', async () => {
    const u = await tempSysroot({ tree: NODE_TREE });
    try {
      const a = await u.sysroot.stage(fixture('rendered-worker-1.json'));
      const staged = t.sysroot.status().staged!;
      expect(hashTree(a.path)).toBe(hashTree(t.sysroot.treePath(staged)));
    } finally {
      u.cleanup();
    }
  });

  it('applies kernel arguments declaratively across configs: 1, then 2 (none), then 3', async () => {
    await reboot(t.sysroot);
    const kargs = (): string[] => t.sysroot.status().deployments.find((d) => d.staged)!.kernelArguments;
    await t.sysroot.stage(fixture('rendered-worker-2.yaml'));
    expect(kargs()).toEqual(['root=UUID=abc', 'rw']);
    await reboot(t.sysroot);
    await t.sysroot.stage(fixture('rendered-worker-3.yaml'));
    expect(kargs()).toEqual(['root=UUID=abc', 'rw', 'y=0', 'z=4', 'y=1', 'z=4']);
  });
});

describe('MachineConfig refusals and warnings', () => {
  let t: TempSysroot;
  let dir: string;
  beforeAll(async () => {
    t = await tempSysroot({ tree: NODE_TREE });
    dir = path.join(t.scratch, 'mcs');
    fs.mkdirSync(dir);
  });
  afterAll(() => t?.cleanup());

  const write = (name: string, edit: (doc: Record<string, any>) => void, format: 'yaml' | 'json' = 'yaml'): string => {
    const doc = renderedDoc(2);
    edit(doc);
    const p = path.join(dir, `${name}.${format}`);
    fs.writeFileSync(p, format === 'yaml' ? stringify(doc) : JSON.stringify(doc));
    return p;
  };

  it.each([
    ['extensions', (d: Record<string, any>) => (d.spec.extensions = ['usbguard']), 'spec.extensions'],
    ['kernelType', (d: Record<string, any>) => (d.spec.kernelType = 'realtime'), 'spec.kernelType'],
    ['fips', (d: Record<string, any>) => (d.spec.fips = true), 'spec.fips'],
    ['ignition-2', (d: Record<string, any>) => (d.spec.config = { ignition: { version: '2.2.0' } }), 'spec.config.ignition.version'],
    ['apiVersion', (d: Record<string, any>) => (d.apiVersion = 'machineconfiguration.openshift.io/v2'), 'apiVersion'],
  ])('refuses %s with exit 3 naming the field, nothing staged', async (name, edit, field) => {
    const before = hashTree(t.sysroot.treePath(t.sysroot.status().booted!));
    const r = await cli(['stage', write(name, edit), '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(3);
    const out = JSON.parse(r.out) as { error: { code: string; path: string; message: string } };
    expect(out.error.code).toBe('SOURCE_UNSUPPORTED');
    expect(out.error.path).toBe(field);
    if (name === 'ignition-2') expect(out.error.message).toContain('2.2.0');
    expect(t.sysroot.status().staged).toBeNull();
    expect(hashTree(t.sysroot.treePath(t.sysroot.status().booted!))).toBe(before);
  });

  it('accepts the defaults of the refused fields (a rendered config carries them)', () => {
    const doc = renderedDoc(2);
    expect([doc.spec.extensions, doc.spec.kernelType, doc.spec.fips]).toEqual([[], 'default', false]);
  });

  it('names Ignition problems under spec.config', async () => {
    const p = write('bad-mode', (d) => (d.spec.config.storage.files[0].mode = 99999), 'json');
    const err = await t.sysroot.stage(p).then(() => null, (e: unknown) => e as StagedrootError);
    expect(err?.code).toBe('SPEC_INVALID');
    expect(err?.path).toBe('spec.config.storage.files[0].mode');
  });

  it('warns about unknown spec fields and unknown Ignition keys, and stages', async () => {
    const p = write('unknown', (d) => {
      d.spec.newField = 'x';
      d.spec.config.storage.files[0].filesystem = 'root';
    });
    const r = await t.sysroot.stage(p);
    expect(r.warnings).toContainEqual(expect.objectContaining({ code: 'UNKNOWN_FIELD', path: 'spec.newField' }));
    expect(r.warnings).toContainEqual(expect.objectContaining({ code: 'UNKNOWN_FIELD', path: 'spec.config.storage.files[0].filesystem' }));
    await t.sysroot.discardStaged();
  });

  it('refuses YAML that is not one MachineConfig, and duplicate keys', async () => {
    const other = path.join(dir, 'pod.yaml');
    fs.writeFileSync(other, 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n');
    expect(() => detectKind(other)).toThrow(/Cannot tell what/);
    const dup = path.join(dir, 'dup.yaml');
    fs.writeFileSync(dup, 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nkind: MachineConfig\n');
    expect(() => detectKind(dup)).toThrow(/Cannot tell what/);
    const err = await machineConfigSource({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', spec: { kernelArguments: ['a b', 7] } }).plan(new (await import('../../../src/fs/trees/read-only-tree.js')).ReadOnlyTree(t.sysroot.treePath(t.sysroot.status().booted!))).catch((e: unknown) => e as StagedrootError);
    expect((err as StagedrootError).issues.map((i) => i.path)).toEqual(['spec.kernelArguments[1]']);
  });

  it('reads YAML as kubectl does: 0644 is octal', async () => {
    const p = path.join(dir, 'octal.yaml');
    fs.writeFileSync(p, ['apiVersion: machineconfiguration.openshift.io/v1', 'kind: MachineConfig', 'metadata:', '  name: 99-octal', 'spec:', '  config:', '    ignition:', '      version: 3.2.0', '    storage:', '      files:', '        - path: /etc/octal.conf', '          mode: 0640', '          contents:', '            source: data:,x', ''].join('\n'));
    const r = await t.sysroot.stage(p);
    expect(fs.statSync(path.join(r.path, 'etc/octal.conf')).mode & 0o7777).toBe(0o640);
    expect(r.label).toBe('99-octal');
    await t.sysroot.discardStaged();
  });
});
