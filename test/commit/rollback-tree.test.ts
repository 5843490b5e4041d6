import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

const FAKE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../helpers/fake-systemctl.sh');
let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const TREE = { 'etc/containers/policy.json': '{}\n', 'etc/hosts': '127.0.0.1 localhost\n', 'usr/lib/os-release': 'ID=test\n' };
const POLICY = '{"default":[{"type":"reject"}]}\n';
const MIRRORS = '[[registry]]\nlocation = "quay.io"\n';

async function booted(): Promise<{ t: TempSysroot; services: { command: string[] }; old: string; oldTree: string }> {
  const s = await tempSysroot({ tree: TREE });
  await s.sysroot.boot({ runDir: '/nonexistent' });
  const old = s.sysroot.status().booted!;
  const oldTree = s.sysroot.status().deployments.find((d) => d.id === old)!.path;
  return { t: s, services: { command: ['sh', FAKE, path.join(s.scratch, 'systemctl.log')] }, old, oldTree };
}
const read = (tree: string, p: string): string | null => (fs.existsSync(path.join(tree, p)) ? fs.readFileSync(path.join(tree, p), 'utf8') : null);

describe('the rollback tree after a live apply', () => {
  it('gets its own files back once the machine boots the live-applied deployment: a rollback boots the old configuration', async () => {
    const b = await booted();
    t = b.t;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY, mode: '0640' }] });
    await t.sysroot.applyLive({ services: b.services });
    expect(read(b.oldTree, 'etc/containers/policy.json'), 'the running tree has the new file').toBe(POLICY);
    expect(fs.readdirSync(path.join(t.dir, 'live-undo'))).toEqual([b.old]);

    const bootResult = await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(bootResult.actions, 'the boot says what it restored').toEqual([`restored 1 live-applied path of deployment ${b.old} as they were before the apply (it no longer runs)`]);
    expect(t.sysroot.status()).toMatchObject({ booted: r.id, rollback: b.old });
    expect(read(b.oldTree, 'etc/containers/policy.json'), 'the rollback tree as it was before the apply').toBe('{}\n');
    expect(fs.statSync(path.join(b.oldTree, 'etc/containers/policy.json')).mode & 0o7777).toBe(0o644);
    expect(read(r.path, 'etc/containers/policy.json')).toBe(POLICY);
    expect((await t.sysroot.verify(b.old)).drift, 'the rollback tree matches its manifest again').toEqual([]);
    expect(fs.readdirSync(path.join(t.dir, 'live-undo'))).toEqual([]);

    await t.sysroot.rollback();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status().booted).toBe(b.old);
    expect(read(b.oldTree, 'etc/containers/policy.json')).toBe('{}\n');
  });

  it('after a clean shutdown (its finalize carries the /etc edits): the next boot, of the live-applied deployment, puts the old files back', async () => {
    const b = await booted();
    t = b.t;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    await t.sysroot.applyLive({ services: b.services });
    fs.writeFileSync(path.join(b.oldTree, 'etc/hosts'), '127.0.0.1 edited-after-the-apply\n');
    await t.sysroot.finalize();
    expect(t.sysroot.status().activeLive, 'the shutdown carried the edits').toBeNull();
    // The next boot is another one than the apply's (the record names the boot it ran in).
    const journal = path.join(t.dir, 'live-undo', b.old, '0', 'journal.json');
    fs.writeFileSync(journal, JSON.stringify({ ...JSON.parse(fs.readFileSync(journal, 'utf8')), bootId: 'an-earlier-boot' }) + '\n');
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status()).toMatchObject({ booted: r.id, rollback: b.old });
    expect(read(r.path, 'etc/hosts'), 'the edit carried').toBe('127.0.0.1 edited-after-the-apply\n');
    expect(read(b.oldTree, 'etc/containers/policy.json'), 'the rollback tree as it was before the apply').toBe('{}\n');
    expect(fs.readdirSync(path.join(t.dir, 'live-undo'))).toEqual([]);
  });

  it('two live applies in one boot are undone in the tree newest first: a file the second added is gone, one both changed is the original', async () => {
    const b = await booted();
    t = b.t;
    await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    await t.sysroot.applyLive({ services: b.services });
    const second = await t.sysroot.stage({
      files: [
        { path: '/etc/containers/policy.json', contents: '{"default":[{"type":"insecureAcceptAnything"}]}\n' },
        { path: '/etc/containers/registries.conf', contents: MIRRORS },
      ],
    });
    expect(second.activation?.mode).toBe('live');
    await t.sysroot.applyLive({ services: b.services });
    expect(read(b.oldTree, 'etc/containers/registries.conf')).toBe(MIRRORS);
    expect(fs.readdirSync(path.join(t.dir, 'live-undo', b.old)).sort()).toEqual(['0', '1']);

    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status().booted).toBe(second.id);
    expect(read(b.oldTree, 'etc/containers/policy.json')).toBe('{}\n');
    expect(read(b.oldTree, 'etc/containers/registries.conf')).toBeNull();
    expect(read(second.path, 'etc/containers/registries.conf')).toBe(MIRRORS);
  });

  it('a rollback before the reboot: the tree runs the live files; its record waits out that boot, and goes once it is booted again', async () => {
    const b = await booted();
    t = b.t;
    await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    await t.sysroot.applyLive({ services: b.services });
    await t.sysroot.rollback();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status()).toMatchObject({ booted: b.old, current: b.old });
    expect(read(b.oldTree, 'etc/containers/policy.json'), 'the running tree is left alone').toBe(POLICY);
    expect(fs.readdirSync(path.join(t.dir, 'live-undo')), 'in the boot of the apply: kept').toEqual([b.old]);
    // The same tree booted in a later boot (the record says which boot the apply ran in).
    const journal = path.join(t.dir, 'live-undo', b.old, '0', 'journal.json');
    fs.writeFileSync(journal, JSON.stringify({ ...JSON.parse(fs.readFileSync(journal, 'utf8')), bootId: 'an-earlier-boot' }) + '\n');
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(read(b.oldTree, 'etc/containers/policy.json'), 'what ran since is its own').toBe(POLICY);
    expect(fs.readdirSync(path.join(t.dir, 'live-undo'))).toEqual([]);
  });
});
