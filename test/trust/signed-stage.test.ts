import * as fs from 'node:fs';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { minisignKey, minisignSign } from './minisign-keys.js';
import { blob, manifestOf, rewriteManifest, skopeo, umociImage } from '../sources/oci/oci-helpers.js';
import { hostPlatform } from '../../src/sources/oci/platform.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

/** A tar layer made with GNU tar from a tree of files. */
async function layer(s: TempSysroot, name: string, files: Record<string, string>): Promise<string> {
  const src = path.join(s.scratch, `${name}.d`);
  for (const [rel, c] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(src, rel)), { recursive: true });
    fs.writeFileSync(path.join(src, rel), c);
  }
  const out = path.join(s.scratch, name);
  await execa('tar', ['-C', src, '-cf', out, '.']);
  return out;
}

const status = async (dir: string) => JSON.parse((await cli(['status', '--json', '--sysroot', dir])).out);

describe('signed sources', () => {
  it('init --trusted-key makes signatures required; a valid one stages and its trusted comment is shown', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const k = await minisignKey(t.scratch, 'release');
    const dir = path.join(t.scratch, 'signed-sysroot');
    expect((await cli(['init', '--sysroot', dir, '--trusted-key', k.pub])).code).toBe(0);
    expect((await cli(['trust', 'list', '--sysroot', dir])).out).toBe(`${k.id}\n`);

    const tar = await layer(t, 'app.tar', { 'etc/os-release': 'ID=test\n', 'etc/app.conf': 'v1\n' });
    // init --from a source is held to the keys it is given
    const other = path.join(t.scratch, 'from-unsigned');
    const refused = await cli(['init', '--sysroot', other, '--trusted-key', k.pub, '--from', tar]);
    expect(refused.code).toBe(3);
    expect(refused.err).toContain('not signed');
    expect(fs.existsSync(path.join(other, 'state.json'))).toBe(false);
    // unsigned: rejected, recorded, nothing staged
    const unsigned = await cli(['stage', tar, '--sysroot', dir]);
    expect(unsigned.code).toBe(3);
    expect(unsigned.err).toContain('not signed');
    let st = await status(dir);
    expect(st.staged).toBeNull();
    expect(st.lastFailure.code).toBe('SIGNATURE_INVALID');
    expect(st.deployments).toHaveLength(1);

    await minisignSign(k.key, tar, { comment: 'app 1.0 from CI' });
    const ok = await cli(['stage', tar, '--sysroot', dir]);
    expect(ok.code, ok.err).toBe(0);
    st = await status(dir);
    const staged = st.deployments.find((d: { id: string }) => d.id === st.staged);
    expect(staged.signature).toEqual({ keyId: k.id, algorithm: 'ED', trustedComment: 'app 1.0 from CI' });
    expect(st.lastFailure).toBeNull();
    expect(fs.readFileSync(path.join(staged.path, 'etc/app.conf'), 'utf8')).toBe('v1\n');
  });

  it('rejects a wrong key, a tampered archive and another file\'s signature; --signature names the file', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const good = await minisignKey(t.scratch, 'good');
    const evil = await minisignKey(t.scratch, 'evil');
    await t.sysroot.addTrustedKey(good.pub);
    const tar = await layer(t, 'app.tar', { 'etc/app.conf': 'v1\n' });

    await minisignSign(evil.key, tar);
    let r = await cli(['stage', tar, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain(evil.id);

    const elsewhere = path.join(t.scratch, 'detached.sig');
    await minisignSign(good.key, tar, { out: elsewhere });
    r = await cli(['stage', tar, '--signature', elsewhere, '--sysroot', t.dir, '--label', 'via-flag']);
    expect(r.code, r.err).toBe(0);

    const other = await layer(t, 'other.tar', { 'etc/other.conf': 'x\n' });
    await minisignSign(good.key, other);
    r = await cli(['stage', tar, '--signature', `${other}.minisig`, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain(good.id);

    fs.appendFileSync(tar, Buffer.alloc(1024)); // tampered after signing (still a valid tar)
    r = await cli(['stage', tar, '--signature', elsewhere, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('does not match');
    const st = await status(t.dir);
    expect(st.lastFailure.code).toBe('SIGNATURE_INVALID');
    expect(st.deployments.find((d: { id: string }) => d.id === st.staged).label).toBe('via-flag');
  });

  it('a directory cannot be signed; removing the last key makes signatures optional again', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const k = await minisignKey(t.scratch, 'k');
    expect((await cli(['trust', 'add', k.pub, '--sysroot', t.dir])).out).toContain(k.id);
    const d = path.join(t.scratch, 'tree');
    fs.mkdirSync(path.join(d, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(d, 'etc/x'), 'x');
    const r = await cli(['stage', d, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('cannot carry a detached signature');
    expect((await cli(['trust', 'remove', k.id.toLowerCase(), '--sysroot', t.dir])).code).toBe(0);
    expect(t.sysroot.trustedKeys()).toEqual([]);
    expect((await cli(['stage', d, '--sysroot', t.dir])).code).toBe(0);
    expect((await cli(['trust', 'remove', k.id, '--sysroot', t.dir])).code).toBe(1);
    expect((await cli(['trust', 'add', path.join(t.scratch, 'nope.pub'), '--sysroot', t.dir])).code).toBe(2);
  });
});

describe('signed images', () => {
  it('an image layout is signed through its selected manifest (DIR.minisig); an archive as a file', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const k = await minisignKey(t.scratch, 'os');
    await t.sysroot.addTrustedKey(k.pub);
    const layout = path.join(t.scratch, 'os');
    await umociImage(t.scratch, layout, 'latest', [{ add: { 'etc/os-release': 'ID=os\n' } }], { arch: hostPlatform().architecture });
    const sig = `${layout}.minisig`;

    let r = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain(`no ${sig}`);

    await minisignSign(k.key, blob(layout, manifestOf(layout).digest), { out: sig, comment: 'os 1' });
    r = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
    const st = await status(t.dir);
    expect(st.deployments.find((d: { id: string }) => d.id === st.staged).signature.trustedComment).toBe('os 1');

    // the index now points at another manifest: the signature no longer covers what is staged
    rewriteManifest(layout, 0, (m) => void (m.annotations = { changed: 'yes' }));
    r = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain(k.id);

    // an oci-archive is signed as a file
    const archive = path.join(t.scratch, 'os.tar');
    await skopeo(['copy', `oci:${layout}:latest`, `oci-archive:${archive}`]);
    await minisignSign(k.key, archive);
    r = await cli(['stage', archive, '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
  });
});
