/* eslint-disable @typescript-eslint/no-explicit-any -- MachineConfig documents are edited here as plain JSON */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { StagedrootError } from '../../../src/errors.js';
import { sourceFromPath } from '../../../src/sources/detect.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { NODE_TREE, renderedDoc } from './machine-config-helpers.js';
import { readIndex, umociImage } from '../oci/oci-helpers.js';

/** spec.osImageURL resolved in a local OCI layout: image and config staged as one deployment. */
describe('a MachineConfig naming its OS image', () => {
  let t: TempSysroot;
  let layout: string;
  let digest: string;
  const mcFile = (name: string, url: string, edit: (d: Record<string, any>) => void = () => {}): string => {
    const doc = renderedDoc(1);
    doc.spec.osImageURL = url;
    edit(doc);
    const p = path.join(t.scratch, `${name}.yaml`);
    fs.writeFileSync(p, stringify(doc));
    return p;
  };

  beforeAll(async () => {
    t = await tempSysroot({ tree: NODE_TREE });
    layout = path.join(t.scratch, 'images');
    await umociImage(t.scratch, layout, '9.6.20260101', [
      { add: { 'etc/os-release': 'ID=rhcos\nVERSION_ID=9.6.20260101\n', 'etc/passwd': 'root:x:0:0:root:/root:/bin/bash\n', 'etc/chrony.conf': 'pool image.example iburst\n', 'usr/lib/os-file': 'from the image\n' } },
    ]);
    digest = readIndex(layout).manifests[0]!.digest;
  });
  afterAll(() => t?.cleanup());

  it('stages image + config as one deployment (by digest): the image tree, the config over it, the origin recorded', async () => {
    const r = await cli(['stage', mcFile('by-digest', `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${digest}`), '--image-store', layout, '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(0);
    const out = JSON.parse(r.out) as { id: string; path: string; warnings: { code: string }[] };
    expect(fs.readFileSync(path.join(out.path, 'usr/lib/os-file'), 'utf8')).toBe('from the image\n');
    expect(fs.readFileSync(path.join(out.path, 'etc/os-release'), 'utf8')).toContain('9.6.20260101');
    expect(fs.readFileSync(path.join(out.path, 'etc/chrony.conf'), 'utf8')).toContain('pool 0.rhel.pool.ntp.org iburst'); // the config's, over the image's
    expect(fs.existsSync(path.join(out.path, 'etc/systemd/system/node-report.service'))).toBe(true);
    expect(fs.existsSync(path.join(out.path, 'etc/group'))).toBe(false); // the booted tree's files are gone: the image is the whole tree
    expect(out.warnings.map((w) => w.code)).not.toContain('OS_IMAGE_NOT_APPLIED');
    const d = t.sysroot.status().deployments.find((x) => x.id === out.id)!;
    expect(d.origin?.digest).toBe(digest);
    expect(d.kernelArguments).toEqual(['y=0', 'z=4', 'y=1', 'z=4']);
    expect((await t.sysroot.verify(out.id)).drift).toEqual([]);
    await t.sysroot.discardStaged();
  });

  it('finds the image by tag (the layout\'s ref.name), through the library\'s path source', async () => {
    const s = await t.sysroot.stage(sourceFromPath(mcFile('by-tag', 'quay.io/openshift-release-dev/ocp-v4.0-art-dev:9.6.20260101'), { imageStore: layout }));
    expect(t.sysroot.status().deployments.find((d) => d.id === s.id)!.origin?.digest).toBe(digest);
    await t.sysroot.discardStaged();
  });

  it('plans the config against the image tree: a config naming a user only the booted tree has is refused', async () => {
    const p = mcFile('user', `x@${digest}`, (d) => d.spec.config.storage.files.push({ path: '/etc/core-owned', contents: { source: 'data:,x' }, user: { name: 'core' } }));
    const r = await cli(['stage', p, '--image-store', layout, '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(3);
    expect(JSON.parse(r.out).error.message).toContain('core');
    expect(t.sysroot.status().staged).toBeNull();
  });

  it('refuses an image the store does not hold, naming the digest', async () => {
    const missing = 'sha256:' + '0'.repeat(64);
    const r = await cli(['stage', mcFile('missing', `x@${missing}`), '--image-store', layout, '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(3);
    expect(JSON.parse(r.out).error.message).toContain(missing);
  });

  it('--image-store applies to MachineConfigs only', async () => {
    const spec = path.join(t.scratch, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/x', contents: 'x' }] }));
    const r = await cli(['stage', spec, '--image-store', layout, '--sysroot', t.dir]);
    expect(r.code, r.out + r.err).toBe(2);
  });

  it('needs no store when the booted deployment already runs the image the config names', async () => {
    const u = await tempSysroot({ tree: NODE_TREE });
    try {
      const first = await u.sysroot.stage(layout);
      await u.sysroot.finalize();
      await u.sysroot.boot();
      expect(u.sysroot.status().deployments.find((d) => d.id === first.id)!.origin?.digest).toBe(digest);
      const p = mcFile('same-image', `x@${digest}`);
      const r = await u.sysroot.stage(p);
      expect(r.warnings.map((w) => w.code)).not.toContain('OS_IMAGE_NOT_APPLIED');
      expect(fs.readFileSync(path.join(r.path, 'usr/lib/os-file'), 'utf8')).toBe('from the image\n');
      expect(r.alreadyRunning).toBeUndefined();
    } finally {
      u.cleanup();
    }
  });

  it('is a usage error when the store does not exist', async () => {
    const err = await Promise.resolve()
      .then(() => sourceFromPath(mcFile('no-store', `x@${digest}`), { imageStore: path.join(t.scratch, 'nowhere') }).inspect!())
      .catch((e: unknown) => e as StagedrootError);
    expect(err).toBeInstanceOf(StagedrootError);
    expect((err as StagedrootError).code).toBe('USAGE');
  });
});
