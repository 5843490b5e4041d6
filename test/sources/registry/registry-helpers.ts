import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as http from 'node:http';
import * as https from 'node:https';
import { execa, type ResultPromise } from 'execa';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { tool } from '../../helpers/tools.js';

/**
 * A real registry for the tests: Debian's docker-registry (distribution 2.8) on
 * 127.0.0.1 at a free port, its storage in a temp dir, with TLS from a CA made with
 * openssl and, when asked, htpasswd Basic auth. Images are pushed with the real skopeo.
 */
export interface TestRegistry {
  /** "127.0.0.1:PORT". */
  host: string;
  port: number;
  /** A certs.d-style root: HOST:PORT/ca.crt (what the client's certsDir takes). */
  certsDir: string;
  /** The CA's certificate (PEM file). */
  caFile: string;
  user?: { name: string; password: string };
  /** Its storage directory (docker/registry/v2/…): a test may damage a blob there. */
  storage: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** A CA and a server certificate for `names` (DNS or IP), signed by it. */
export async function makeCerts(dir: string, names: string[] = ['127.0.0.1', 'localhost'], o: { caName?: string } = {}): Promise<{ ca: string; caKey: string; cert: string; key: string }> {
  fs.mkdirSync(dir, { recursive: true });
  const ca = path.join(dir, 'ca.crt');
  const caKey = path.join(dir, 'ca.key');
  const key = path.join(dir, 'server.key');
  const csr = path.join(dir, 'server.csr');
  const cert = path.join(dir, 'server.crt');
  const ext = path.join(dir, 'san.ext');
  await tool('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', caKey, '-out', ca, '-days', '2', '-subj', `/CN=${o.caName ?? 'stagedroot test CA'}`]);
  await tool('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${names[0]}`]);
  const san = names.map((n) => (/^[\d.]+$/.test(n) || n.includes(':') ? `IP:${n}` : `DNS:${n}`)).join(',');
  fs.writeFileSync(ext, `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n`);
  await tool('openssl', ['x509', '-req', '-in', csr, '-CA', ca, '-CAkey', caKey, '-CAcreateserial', '-out', cert, '-days', '2', '-extfile', ext]);
  return { ca, caKey, cert, key };
}

export async function startRegistry(scratch: string, o: { htpasswd?: { name: string; password: string }; tls?: boolean } = {}): Promise<TestRegistry> {
  const tls = o.tls ?? true;
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const certs = tls ? await makeCerts(path.join(scratch, 'pki')) : null;
  const certsDir = path.join(scratch, 'certs.d');
  if (certs) {
    fs.mkdirSync(path.join(certsDir, host), { recursive: true });
    fs.copyFileSync(certs.ca, path.join(certsDir, host, 'ca.crt'));
  }
  const lines = ['version: 0.1', 'log:', '  level: warn', 'storage:', '  filesystem:', `    rootdirectory: ${path.join(scratch, 'storage')}`, '  delete:', '    enabled: true', 'http:', `  addr: ${host}`];
  if (certs) lines.push('  tls:', `    certificate: ${certs.cert}`, `    key: ${certs.key}`);
  if (o.htpasswd) {
    const file = path.join(scratch, 'htpasswd');
    await tool('htpasswd', ['-Bbc', file, o.htpasswd.name, o.htpasswd.password]);
    lines.push('auth:', '  htpasswd:', '    realm: stagedroot-test', `    path: ${file}`);
  }
  const config = path.join(scratch, 'registry.yml');
  fs.writeFileSync(config, lines.join('\n') + '\n');
  const proc: ResultPromise = execa('docker-registry', ['serve', config], { reject: false, all: true });
  let output = '';
  proc.all?.on('data', (d: Buffer) => (output += d.toString()));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (proc.exitCode !== null && proc.exitCode !== undefined) throw new Error(`docker-registry exited (${proc.exitCode}): ${output}`);
    const ok = await new Promise<boolean>((resolve) => {
      const req = (tls ? https : http).get({ host: '127.0.0.1', port, path: '/v2/', ...(certs ? { ca: fs.readFileSync(certs.ca) } : {}) }, (res: http.IncomingMessage) => {
        res.resume();
        resolve(res.statusCode === 200 || res.statusCode === 401);
      });
      req.on('error', () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error(`docker-registry did not answer on ${host} within 15 s: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host,
    port,
    certsDir,
    caFile: certs?.ca ?? '',
    storage: path.join(scratch, 'storage'),
    ...(o.htpasswd ? { user: o.htpasswd } : {}),
    async stop() {
      proc.kill('SIGTERM');
      await proc;
    },
  };
}

/** `skopeo copy oci:LAYOUT:TAG docker://HOST/REPO:TAG` with the registry's CA and credentials. */
export async function push(reg: TestRegistry, layout: string, repoTag: string, o: { format?: 'oci' | 'v2s2'; all?: boolean } = {}): Promise<void> {
  const [, tag] = repoTag.split(':');
  await tool('skopeo', [
    '--insecure-policy',
    'copy',
    '--quiet',
    ...(o.format ? ['--format', o.format] : []),
    ...(o.all ? ['--all'] : []),
    // a plain-http registry (tls: false) has no CA: skopeo is told not to speak TLS to it
    ...(reg.caFile ? ['--dest-cert-dir', path.join(reg.certsDir, reg.host)] : ['--dest-tls-verify=false']),
    ...(reg.user ? ['--dest-creds', `${reg.user.name}:${reg.user.password}`] : []),
    `oci:${layout}:${o.all ? '' : tag}`.replace(/:$/, ''),
    `docker://${reg.host}/${repoTag}`,
  ]);
}

/** `skopeo copy docker://… oci:DIR` (the peer pull the tests compare with). */
export async function skopeoPull(reg: TestRegistry, repoTag: string, dir: string): Promise<void> {
  await tool('skopeo', ['--insecure-policy', 'copy', '--quiet', '--src-cert-dir', path.join(reg.certsDir, reg.host), ...(reg.user ? ['--src-creds', `${reg.user.name}:${reg.user.password}`] : []), `docker://${reg.host}/${repoTag}`, `oci:${dir}:${repoTag.split(':')[1]}`]);
}

/** A docker config.json with the registry's credentials. */
export function writeAuthFile(file: string, entries: Record<string, { name: string; password: string }>): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const auths = Object.fromEntries(Object.entries(entries).map(([k, u]) => [k, { auth: Buffer.from(`${u.name}:${u.password}`).toString('base64') }]));
  fs.writeFileSync(file, JSON.stringify({ auths }));
  return file;
}

/** A GPG key made in the keyring GNUPGHOME `gnupg` (RSA 2048, no passphrase): its fingerprint and its public key exported to DIR/NAME.asc. */
export async function gpgKey(gnupg: string, dir: string, name: string): Promise<{ fpr: string; pub: string }> {
  const params = path.join(dir, `${name}.params`);
  fs.writeFileSync(params, `%no-protection\nKey-Type: RSA\nKey-Length: 2048\nName-Real: ${name}\nName-Email: ${name}@stagedroot.invalid\nExpire-Date: 0\n%commit\n`);
  await tool('gpg', ['--batch', '--gen-key', params], { env: { GNUPGHOME: gnupg } });
  const list = await tool('gpg', ['--with-colons', '--list-keys', `${name}@stagedroot.invalid`], { env: { GNUPGHOME: gnupg } });
  const fpr = /^fpr:+([0-9A-F]{40}):/m.exec(String(list.stdout))![1]!;
  const pub = path.join(dir, `${name}.asc`);
  fs.writeFileSync(pub, String((await tool('gpg', ['--armor', '--export', fpr], { env: { GNUPGHOME: gnupg } })).stdout));
  return { fpr, pub };
}

/** A registries.conf (v2) at FILE whose `prefix` (HOST/REPO) is pulled from `mirror` (HOST/REPO) first, then from itself. */
export function mirrorConf(file: string, prefix: string, mirror: string): string {
  fs.writeFileSync(file, `[[registry]]\nprefix = "${prefix}"\nlocation = "${prefix}"\n[[registry.mirror]]\nlocation = "${mirror}"\n`);
  return file;
}

/** The scratch of a registry test file or describe block: see withRegistryScratch. */
export interface RegistryScratch {
  /** The temp dir (made before the file's or block's own beforeAll, removed after all its tests). */
  readonly dir: string;
  /** A registry (startRegistry) with its files in DIR/NAME, stopped after all the tests. */
  startRegistry(name: string, o?: Parameters<typeof startRegistry>[1]): Promise<TestRegistry>;
  /** A temp sysroot (tempSysroot) for the test that makes it, removed after that test. */
  tempSysroot(o?: Parameters<typeof tempSysroot>[0]): Promise<TempSysroot>;
}

/**
 * The set-up and tear-down every registry test shares, registered in the caller's file or
 * describe block: a temp dir (`prefix` + random) made in a beforeAll, the registries
 * started through it stopped and the dir removed in an afterAll, the temp sysroots made
 * through it removed after each test.
 */
export function withRegistryScratch(prefix: string): RegistryScratch {
  let dir: string | undefined;
  const registries: TestRegistry[] = [];
  const sysroots: TempSysroot[] = [];
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  });
  afterEach(() => {
    for (const t of sysroots.splice(0)) t.cleanup();
  });
  afterAll(async () => {
    await Promise.all(registries.splice(0).map((r) => r.stop()));
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });
  const scratch: RegistryScratch = {
    get dir(): string {
      if (dir === undefined) throw new Error('withRegistryScratch: the scratch dir is made in a beforeAll; read it in a hook or a test');
      return dir;
    },
    async startRegistry(name, o) {
      const home = path.join(scratch.dir, name);
      fs.mkdirSync(home, { recursive: true });
      const reg = await startRegistry(home, o);
      registries.push(reg);
      return reg;
    },
    async tempSysroot(o) {
      const t = await tempSysroot(o);
      sysroots.push(t);
      return t;
    },
  };
  return scratch;
}
