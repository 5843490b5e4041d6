/**
 * The registry client against a real registry: Debian's docker-registry (distribution
 * 2.8) on 127.0.0.1, with TLS from an openssl-made CA and htpasswd Basic auth; images
 * built with umoci, pushed and pulled with the real skopeo.
 */
import * as fs from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { findAuthFile } from '../../../src/sources/registry/auth-file.js';
import { RegistryClient } from '../../../src/sources/registry/client.js';
import { pullImage } from '../../../src/sources/registry/pull.js';
import { parseDockerReference } from '../../../src/sources/registry/reference.js';
import { directoryStore } from '../../../src/sources/oci/blob-store.js';
import { resolveOci } from '../../../src/sources/oci/resolve.js';
import { blob, manifestOf, readIndex, sha256, umociImage } from '../oci/oci-helpers.js';
import { makeCerts, push, skopeoPull, writeAuthFile, withRegistryScratch, type TestRegistry } from './registry-helpers.js';

const USER = { name: 'puller', password: 'pässword-not-printed-7' };
const scratch = withRegistryScratch('stagedroot-registry-');
let reg: TestRegistry;
let layout: string;
let auth: string;

beforeAll(async () => {
  reg = await scratch.startRegistry('registry', { htpasswd: USER });
  layout = path.join(scratch.dir, 'layout');
  await umociImage(scratch.dir, layout, '1', [{ add: { 'etc/os-release': 'ID=image\nVERSION_ID=1\n', 'usr/bin/tool': 'tool\n' } }, { add: { 'usr/share/big': 'x'.repeat(300_000) } }], { labels: { 'org.opencontainers.image.version': '1.0' } });
  await push(reg, layout, 'os/base:1');
  auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), { [reg.host]: USER });
}, 120_000);

const ref = (s = 'os/base:1') => parseDockerReference(`docker://${reg.host}/${s}`);
const opts = async () => ({ auth: await findAuthFile({ authfile: auth }), certsDir: reg.certsDir, backoffMs: 10 });

describe('a real registry (docker-registry 2.8, TLS, htpasswd)', () => {
  it('pulls an image into an OCI layout: the blobs skopeo pulls, read back as a local layout', async () => {
    const dir = path.join(scratch.dir, 'pull-1');
    const pulled = await pullImage(ref(), dir, await opts());
    const peer = path.join(scratch.dir, 'skopeo-1');
    await skopeoPull(reg, 'os/base:1', peer);
    const theirs = manifestOf(peer);
    expect(pulled.digest).toBe(theirs.digest);
    expect(pulled.registry).toBe(`https://${reg.host}`);
    expect(pulled.credentials).toBe(`the credentials for ${reg.host} in ${auth}`);
    expect(pulled.pullspec).toBe(`${reg.host}/os/base@${theirs.digest}`);
    for (const l of [theirs.json.config, ...theirs.json.layers]) {
      expect(sha256(fs.readFileSync(blob(dir, l.digest))), l.digest).toBe(l.digest.slice(7));
      expect(fs.readFileSync(blob(dir, l.digest)).equals(fs.readFileSync(blob(peer, l.digest)))).toBe(true);
    }
    expect(pulled.fetched).toBe(theirs.json.layers.reduce((n, l) => n + l.size, 0) + fs.statSync(blob(peer, theirs.json.config.digest)).size);
    // no partial file is left
    expect(fs.readdirSync(path.join(dir, 'blobs', 'sha256')).filter((n) => n.endsWith('.partial'))).toEqual([]);
    const img = await resolveOci(directoryStore(dir), { ref: '1' });
    expect(img.digest).toBe(theirs.digest);
    expect(img.labels['org.opencontainers.image.version']).toBe('1.0');
    expect(img.layers).toHaveLength(2);
  });

  it('does not fetch again what is whole in the directory', async () => {
    const dir = path.join(scratch.dir, 'pull-2');
    const first = await pullImage(ref(), dir, await opts());
    const again = await pullImage(ref(), dir, await opts());
    const m = manifestOf(layout).json;
    expect(first.fetched).toBe(m.layers.reduce((n, l) => n + l.size, 0) + fs.statSync(blob(layout, m.config.digest)).size);
    expect(again.fetched).toBe(0);
    expect(again.digest).toBe(first.digest);
  });

  it('checks free space against the layers still to fetch before fetching one (NO_SPACE, nothing of a layer written)', async () => {
    const dir = path.join(scratch.dir, 'pull-space');
    fs.mkdirSync(dir, { recursive: true });
    const seen: string[] = [];
    // more than is free, whatever others write or remove on the filesystem meanwhile
    const free = fs.statfsSync(dir).bavail * fs.statfsSync(dir).bsize + 2 ** 40;
    const err = (await pullImage(ref(), dir, { ...(await opts()), reserveBytes: free, onBlob: (e) => seen.push(e.what) }).catch((e: unknown) => e)) as StagedrootError;
    expect(err.code).toBe('NO_SPACE');
    const layers = manifestOf(layout).json.layers;
    expect(err.message).toMatch(new RegExp(`^Not enough free space to pull ${reg.host}/os/base:1: its layers need ${layers.reduce((n, l) => n + l.size, 0)} more bytes \\(and ${free} kept free\\), \\d+ bytes are free on the filesystem of ${dir}$`));
    expect(seen).toEqual(['the config']);
    for (const l of layers) expect(fs.existsSync(blob(dir, l.digest)) || fs.existsSync(`${blob(dir, l.digest)}.partial`)).toBe(false);
    // with room, the same directory pulls
    expect((await pullImage(ref(), dir, await opts())).digest).toBe(manifestOf(layout).digest);
  });

  it('pulls by digest, and by the digest of an index (the platform picked from it)', async () => {
    const digest = manifestOf(layout).digest;
    const byDigest = await pullImage(ref(`os/base@${digest}`), path.join(scratch.dir, 'pull-3'), await opts());
    expect(byDigest.digest).toBe(digest);
    // an index of two platforms, pushed whole
    const multi = path.join(scratch.dir, 'multi');
    await umociImage(scratch.dir, multi, 'amd', [{ add: { a: 'amd64\n' } }], { arch: 'amd64' });
    await umociImage(scratch.dir, multi, 'arm', [{ add: { a: 'arm64\n' } }], { arch: 'arm64' });
    const idx = readIndex(multi);
    const indexDoc = {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: idx.manifests.map((m, i) => ({ mediaType: m.mediaType, digest: m.digest, size: m.size, platform: { os: 'linux', architecture: i === 0 ? 'amd64' : 'arm64' } })),
    };
    const bytes = Buffer.from(JSON.stringify(indexDoc));
    const indexDigest = `sha256:${sha256(bytes)}`;
    fs.writeFileSync(blob(multi, indexDigest), bytes);
    fs.writeFileSync(path.join(multi, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: indexDoc.mediaType, digest: indexDigest, size: bytes.length, annotations: { 'org.opencontainers.image.ref.name': 'multi' } }] }));
    await push(reg, multi, 'os/multi:multi', { all: true });
    for (const [arch, i] of [['arm64', 1], ['amd64', 0]] as const) {
      const dir = path.join(scratch.dir, `pull-multi-${arch}`);
      const p = await pullImage(ref('os/multi:multi'), dir, { ...(await opts()), platform: { os: 'linux', architecture: arch } });
      expect(p.digest).toBe(idx.manifests[i]!.digest);
      expect(p.resolvedDigest).toBe(indexDigest);
      expect(p.platform).toBe(`linux/${arch}`);
      expect(p.pullspec).toBe(`${reg.host}/os/multi@${indexDigest}`);
      expect(fs.existsSync(blob(dir, indexDigest))).toBe(true);
    }
    await expect(pullImage(ref('os/multi:multi'), path.join(scratch.dir, 'pull-multi-s390x'), { ...(await opts()), platform: { os: 'linux', architecture: 's390x' } })).rejects.toThrow(/has no manifest for linux\/s390x: it has linux\/amd64 \(sha256:.*\), linux\/arm64/);
  }, 60_000);

  it('pulls a Docker v2 schema 2 image (manifest by the Docker media type)', async () => {
    await push(reg, layout, 'os/docker:1', { format: 'v2s2' });
    const c = new RegistryClient(ref('os/docker:1'), await opts());
    const r = await c.resolve();
    expect(r.manifest.mediaType).toBe('application/vnd.docker.distribution.manifest.v2+json');
    const p = await pullImage(ref('os/docker:1'), path.join(scratch.dir, 'pull-docker'), await opts());
    const img = await resolveOci(directoryStore(p.dir), {});
    expect(img.mediaType).toBe('application/vnd.docker.distribution.manifest.v2+json');
  });

  it('without credentials: the registry needs them, and the error says there are none, naming the image', async () => {
    const err = await pullImage(ref(), path.join(scratch.dir, 'anon'), { auth: null, certsDir: reg.certsDir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StagedrootError);
    expect((err as StagedrootError).code).toBe('REGISTRY_FAILED');
    expect((err as Error).message).toMatch(new RegExp(`^${reg.host}/os/base:1: .*the registry needs credentials \\(401 Unauthorized\\) and there are no credentials`));
  });

  it('wrong credentials: refused, naming the file, never the password', async () => {
    const bad = writeAuthFile(path.join(scratch.dir, 'bad-auth.json'), { [reg.host]: { name: USER.name, password: 'wrong-secret-42' } });
    const err = (await pullImage(ref(), path.join(scratch.dir, 'bad'), { auth: await findAuthFile({ authfile: bad }), certsDir: reg.certsDir }).catch((e: unknown) => e)) as StagedrootError;
    expect(err.code).toBe('REGISTRY_FAILED');
    expect(err.message).toContain(`the registry refused the credentials for ${reg.host} in ${bad} (401 Unauthorized)`);
    expect(JSON.stringify(err.toJSON()) + err.message + String(err.stack)).not.toMatch(/wrong-secret-42|cHVsbGVy/);
  });

  it('a tag the registry does not have, and a blob it does not have: REGISTRY_FAILED naming them', async () => {
    await expect(pullImage(ref('os/base:nope'), path.join(scratch.dir, 'nope'), await opts())).rejects.toThrow(new RegExp(`${reg.host}/os/base:nope: the manifest \\(tag nope\\): the registry has no tag nope \\(404\\)`));
    const c = new RegistryClient(ref(), await opts());
    const missing = `sha256:${'0'.repeat(64)}`;
    await expect(c.fetchBlob({ digest: missing, size: 10 }, path.join(scratch.dir, 'missing-blob'), 'layer 1 of 1')).rejects.toThrow(`blob ${missing} (layer 1 of 1): the registry has no such blob (404)`);
  });

  it('TLS: the CA from certs.d is needed; without it, or for a certificate of another name, the pull fails saying so', async () => {
    const empty = path.join(scratch.dir, 'no-certs');
    fs.mkdirSync(empty, { recursive: true });
    await expect(pullImage(ref(), path.join(scratch.dir, 'tls-1'), { ...(await opts()), certsDir: empty, retries: 0 })).rejects.toThrow(/the TLS certificate of 127\.0\.0\.1:\d+ cannot be verified: (SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|DEPTH_ZERO_SELF_SIGNED_CERT)/);
    // a server whose certificate (from a CA the client trusts) is for another name
    const pki = await makeCerts(path.join(scratch.dir, 'pki-other'), ['other.example']);
    const server = https.createServer({ cert: fs.readFileSync(pki.cert), key: fs.readFileSync(pki.key) }, (_q, res) => res.end('{}'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const other = path.join(scratch.dir, 'certs-other');
    fs.mkdirSync(path.join(other, host), { recursive: true });
    fs.copyFileSync(pki.ca, path.join(other, host, 'ca.crt'));
    try {
      await expect(pullImage(parseDockerReference(`docker://${host}/os/base:1`), path.join(scratch.dir, 'tls-2'), { ...(await opts()), certsDir: other })).rejects.toThrow(/cannot be verified: ERR_TLS_CERT_ALTNAME_INVALID/);
    } finally {
      server.close();
    }
  });

  it('a client certificate and key in certs.d are offered, and a server that requires one accepts them', async () => {
    const { tlsFor } = await import('../../../src/sources/registry/tls-files.js');
    const pki = await makeCerts(path.join(scratch.dir, 'client-pki'), ['client']);
    const dir = path.join(scratch.dir, 'certs-client', 'reg.example:5000');
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(pki.ca, path.join(dir, 'ca.crt'));
    fs.copyFileSync(pki.cert, path.join(dir, 'client.cert'));
    fs.copyFileSync(pki.key, path.join(dir, 'client.key'));
    const t = await tlsFor('reg.example:5000', { certsDir: path.join(scratch.dir, 'certs-client') });
    expect(t.cert?.equals(fs.readFileSync(pki.cert))).toBe(true);
    expect(t.key?.equals(fs.readFileSync(pki.key))).toBe(true);
    expect(t.files).toEqual(['/etc/ssl/certs/ca-certificates.crt', path.join(dir, 'ca.crt'), path.join(dir, 'client.cert'), path.join(dir, 'client.key')]);
    // the handshake: a server that requires a client certificate from its CA gets the one in certs.d
    const both = await makeCerts(path.join(scratch.dir, 'mtls-pki'), ['localhost']);
    const server = https.createServer({ cert: fs.readFileSync(both.cert), key: fs.readFileSync(both.key), ca: fs.readFileSync(both.ca), requestCert: true, rejectUnauthorized: true }, (_q, res) => res.writeHead(200).end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const mtlsRoot = path.join(scratch.dir, 'certs-mtls');
    const mdir = path.join(mtlsRoot, `localhost:${port}`);
    fs.mkdirSync(mdir, { recursive: true });
    fs.copyFileSync(both.ca, path.join(mdir, 'ca.crt'));
    const c = (root: string) => new RegistryClient(parseDockerReference(`docker://localhost:${port}/os:1`), { certsDir: root, retries: 0 });
    try {
      await expect(c(mtlsRoot).ping()).rejects.toThrow(/cannot be verified|ECONNRESET|certificate/);
      fs.copyFileSync(both.cert, path.join(mdir, 'client.cert'));
      fs.copyFileSync(both.key, path.join(mdir, 'client.key'));
      await expect(c(mtlsRoot).ping()).resolves.toBeUndefined();
    } finally {
      server.close();
    }
    fs.rmSync(path.join(dir, 'client.key'));
    await expect(tlsFor('reg.example:5000', { certsDir: path.join(scratch.dir, 'certs-client') })).rejects.toThrow(/client\.cert: a client certificate without its key/);
  });
});
