// Scenario 8: the machine updates its OS from a registry. The guest has no network, so the
// registry runs inside it: Debian's docker-registry (distribution 2.8, in the userspace,
// its unit disabled) started on 127.0.0.1:5000 with its storage on a disk of its own (vdc,
// read-only), which the host filled before the boot by pushing the new OS image into a
// docker-registry of its own with skopeo. The new OS image is the machine's current tree
// (read from its disk while it is off) as one layer, plus a small layer on top that marks
// it v2. In the guest: registries.conf marks the loopback registry insecure (plain http),
// `stagedroot switch docker://127.0.0.1:5000/os:v2` pulls and stages it, the reboot boots
// it (its origin records the pullspec, the digest skopeo pushed and the registry), an
// `upgrade` finds nothing to do, `stagedroot rollback` and the next boot is the old tree.
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { withDisk } from './image.mjs';
import { REBOOT, POWEROFF, STREAMED_STAGE, Scenario, dep } from './scenario.mjs';

const REF = 'docker://127.0.0.1:5000/os:v2';
const VERSION_LABEL = 'org.opencontainers.image.version';

function run(cmd, args, o = {}) {
  return (execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20, ...o }) ?? '').toString();
}

const sha256 = (file) => run('sha256sum', [file]).split(' ')[0];

/** Writes a blob (a file moved in, or bytes) into an OCI layout; its descriptor. */
function blob(layout, mediaType, from) {
  const dir = path.join(layout, 'blobs/sha256');
  fs.mkdirSync(dir, { recursive: true });
  let hex;
  if (typeof from === 'string') {
    hex = sha256(from);
    fs.renameSync(from, path.join(dir, hex));
  } else {
    const tmp = path.join(dir, 'tmp');
    fs.writeFileSync(tmp, from);
    hex = sha256(tmp);
    fs.renameSync(tmp, path.join(dir, hex));
  }
  return { mediaType, digest: `sha256:${hex}`, size: fs.statSync(path.join(dir, hex)).size };
}

/**
 * The new OS image as an OCI layout at `layout` (tag v2): the tree the machine's `current`
 * names, read from its root partition mounted read-only, as an uncompressed layer, and a
 * layer adding /etc/os-v2 and /usr/lib/os-v2. skopeo's push to the registry gzips them
 * (containers/image's docker destination asks for compressed layers): the registry and the
 * guest's blob directory hold them as tar+gzip, about 0.4 of the tree's size.
 */
export function buildOsImage(machine, work, layout) {
  const mnt = path.join(work, 'registry-src.mnt');
  const layers = [];
  const base = path.join(work, 'os-base.tar');
  withDisk(machine.img, (a, dev) => {
    a.mount(['-o', 'ro', `${dev}p2`], mnt);
    const current = fs.readlinkSync(path.join(mnt, 'stagedroot/current'));
    const tree = path.resolve(path.join(mnt, 'stagedroot'), current);
    const names = fs.readdirSync(tree).sort();
    run('tar', ['-C', tree, '--numeric-owner', '--xattrs', '--xattrs-include=*', '--sort=name', '-cf', base, ...names]);
  });
  fs.rmdirSync(mnt);
  const top = path.join(work, 'os-v2-layer');
  fs.mkdirSync(path.join(top, 'etc'), { recursive: true });
  fs.mkdirSync(path.join(top, 'usr/lib'), { recursive: true });
  fs.writeFileSync(path.join(top, 'etc/os-v2'), 'v2 from the registry\n');
  fs.writeFileSync(path.join(top, 'usr/lib/os-v2'), 'v2 from the registry\n');
  const topTar = path.join(work, 'os-v2.tar');
  run('tar', ['-C', top, '--owner=0', '--group=0', '--numeric-owner', '-cf', topTar, 'etc/os-v2', 'usr/lib/os-v2']);
  fs.rmSync(top, { recursive: true });
  fs.rmSync(layout, { recursive: true, force: true });
  for (const t of [base, topTar]) layers.push(blob(layout, 'application/vnd.oci.image.layer.v1.tar', t));
  const config = blob(
    layout,
    'application/vnd.oci.image.config.v1+json',
    Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: { Labels: { [VERSION_LABEL]: 'v2' } }, rootfs: { type: 'layers', diff_ids: layers.map((l) => l.digest) } })),
  );
  const manifest = blob(layout, 'application/vnd.oci.image.manifest.v1+json', Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config, layers })));
  fs.writeFileSync(path.join(layout, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  fs.writeFileSync(path.join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ ...manifest, annotations: { 'org.opencontainers.image.ref.name': 'v2' } }] }));
  return { bytes: layers.reduce((n, l) => n + l.size, 0) };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const answers = (port) =>
  new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/v2/' }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
  });

/**
 * The registry disk (`<work>/registry.img`, ext4): the host's docker-registry, its
 * storage on the disk's filesystem, receives the image from `skopeo copy`; the guest's
 * registry serves that storage. Returns the disk and the manifest digest skopeo pushed.
 */
export async function buildRegistryDisk(layout, work) {
  const img = path.join(work, 'registry.img');
  fs.rmSync(img, { force: true });
  const bytes = fs.readdirSync(path.join(layout, 'blobs/sha256')).reduce((n, f) => n + fs.statSync(path.join(layout, 'blobs/sha256', f)).size, 0);
  run('truncate', ['-s', String(Math.ceil((bytes * 1.3 + (256 << 20)) / (1 << 20))) + 'M', img]);
  run('mkfs.ext4', ['-q', '-F', '-L', 'registry', img]);
  const mnt = path.join(work, 'registry.mnt');
  fs.mkdirSync(mnt, { recursive: true });
  run('mount', ['-o', 'loop', img, mnt]);
  let reg = null;
  try {
    const port = await freePort();
    const config = path.join(work, 'host-registry.yml');
    fs.writeFileSync(config, `version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: ${mnt}\nhttp:\n  addr: 127.0.0.1:${port}\n`);
    let output = '';
    reg = spawn('docker-registry', ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    reg.stdout.on('data', (d) => (output += d));
    reg.stderr.on('data', (d) => (output += d));
    const deadline = Date.now() + 15_000;
    while (!(await answers(port))) {
      if (reg.exitCode !== null || Date.now() > deadline) throw new Error(`the host's docker-registry did not answer on 127.0.0.1:${port}: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const digestFile = path.join(work, 'os-v2.digest');
    run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', '--digestfile', digestFile, `oci:${layout}:v2`, `docker://127.0.0.1:${port}/os:v2`]);
    return { img, digest: fs.readFileSync(digestFile, 'utf8').trim() };
  } finally {
    if (reg && reg.exitCode === null) {
      const exited = new Promise((r) => reg.once('exit', r));
      reg.kill('SIGTERM');
      await exited;
    }
    run('umount', [mnt]);
    fs.rmdirSync(mnt);
  }
}

/** In the guest: the registry disk mounted read-only and docker-registry serving it on 127.0.0.1:5000 (a unit of its own, stopped before the unmount at shutdown). */
const START_REGISTRY = `mkdir -p /mnt/registry && mount -o ro /dev/vdc /mnt/registry
cat >/run/registry.yml <<'YML'
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: /mnt/registry
  maintenance:
    uploadpurging:
      enabled: false
    readonly:
      enabled: true
http:
  addr: 127.0.0.1:5000
YML
systemd-run --unit=os-registry -p RequiresMountsFor=/mnt/registry -p User=docker-registry docker-registry serve /run/registry.yml >/dev/null 2>&1
i=0; until bash -c 'exec 3<>/dev/tcp/127.0.0.1/5000' 2>/dev/null || [ $i -ge 600 ]; do i=$((i + 1)); sleep 0.1; done
r registry "$(systemctl is-active os-registry.service) after $i tries"
`;

/** What the admin writes once: the loopback registry speaks plain http (registries.conf, insecure). */
const REGISTRIES_CONF = `mkdir -p /etc/containers/registries.conf.d
cat >/etc/containers/registries.conf.d/50-os-registry.conf <<'CONF'
[[registry]]
location = "127.0.0.1:5000"
insecure = true
CONF
`;

const MARKERS = `r etc-marker "$(cat /etc/os-v2 2>&1)"
r usr-marker "$(cat /usr/lib/os-v2 2>&1)"
`;

export async function updateFromRegistry(env) {
  const s = new Scenario('an OS update from a registry in the guest (docker-registry on 127.0.0.1, its blobs on a disk): switch pulls and stages it, the reboot boots it with its origin recorded, upgrade finds nothing new, rollback boots the old tree', env);
  const t0 = Date.now();
  const layout = path.join(env.out, 'os-v2.oci');
  const { bytes } = buildOsImage(env.machine, env.out, layout);
  const { img, digest } = await buildRegistryDisk(layout, env.out);
  fs.rmSync(layout, { recursive: true });
  s.notes.push(`image: ${(bytes / (1 << 20)).toFixed(0)} MiB in 2 uncompressed layers, ${digest}; built and pushed on the host in ${((Date.now() - t0) / 1000).toFixed(0)}s`);
  s.machine = { ...env.machine, packages: img };

  const a = await s.boot('r-switch', `${START_REGISTRY}${REGISTRIES_CONF}${MARKERS}r pull-started "$(cut -d' ' -f1 /proc/uptime)"
${STREAMED_STAGE(`stagedroot switch ${REF}`)}r pull-ended "$(cut -d' ' -f1 /proc/uptime)"
r blob-dir "$(du -sm /var/cache/stagedroot/registry 2>&1 | cut -f1)"
journalctl -b -u os-registry.service --no-pager -o cat 2>&1 | tail -n 20 >/dev/console
${REBOOT}`);
  s.clean(a, 'switch boot');
  s.check((a.results.get('registry') ?? '').startsWith('active'), `docker-registry in the guest: ${a.results.get('registry')}`);
  s.check(/No such file/.test(a.results.get('etc-marker') ?? ''), `the old tree has no /etc/os-v2: ${a.results.get('etc-marker')}`);
  s.eq(a.results.get('stage-exit'), '0', `\`stagedroot switch ${REF}\` exit code`);
  const old = a.status?.booted ?? null;
  const staged = a.status?.staged ?? null;
  const pull = Number(a.results.get('pull-ended')) - Number(a.results.get('pull-started'));
  if (Number.isFinite(pull)) s.notes.push(`switch (the pull from the guest's registry, the import, the stage) took ${pull.toFixed(0)}s in the guest; the blob directory holds ${a.results.get('blob-dir')} MiB after it`);
  if (!s.check(staged !== null, 'the switch left nothing staged')) return s;
  const origin = dep(a.status, staged)?.origin ?? null;
  s.eq(origin?.digest, digest, 'the staged deployment\'s origin.digest (the manifest skopeo pushed)');

  const b = await s.boot('r-v2', `${MARKERS}r health "$(systemctl is-active stagedroot-health.service)"
r usr "$(touch /usr/r-probe 2>/dev/null && echo writable || echo read-only)"
${START_REGISTRY}stagedroot upgrade >/run/upgrade.log 2>&1; r upgrade $?; cat /run/upgrade.log >/dev/console
r status-v2 "$(st)"
stagedroot rollback >/run/rollback.log 2>&1; r rollback $?; cat /run/rollback.log >/dev/console
${REBOOT}`);
  s.clean(b, 'boot of the pulled image');
  s.rootIs(b, staged, 'after the switch');
  s.eq(b.results.get('etc-marker'), 'v2 from the registry', "the image's /etc/os-v2");
  s.eq(b.results.get('usr-marker'), 'v2 from the registry', "the image's /usr/lib/os-v2");
  s.eq(b.results.get('health'), 'active', 'stagedroot-health.service');
  s.eq(b.results.get('usr'), 'read-only', '/usr');
  s.eq(b.results.get('upgrade'), '0', '`stagedroot upgrade` of the tag that still names the booted digest');
  s.eq(b.results.get('rollback'), '0', '`stagedroot rollback`');
  const v2 = JSON.parse(Buffer.from(b.results.get('status-v2') ?? 'bnVsbA==', 'base64').toString());
  const booted = dep(v2, staged)?.origin ?? null;
  s.eq(v2?.booted, staged, 'status.booted after the switch');
  s.eq(v2?.staged, null, 'status.staged after the upgrade that found nothing new');
  s.eq(booted?.kind, 'oci-image', 'origin.kind');
  s.eq(booted?.digest, digest, 'origin.digest');
  s.eq(booted?.pullspec, '127.0.0.1:5000/os:v2', 'origin.pullspec');
  s.eq(booted?.registry, 'http://127.0.0.1:5000', 'origin.registry');
  s.eq(booted?.labels?.[VERSION_LABEL], 'v2', `origin.labels["${VERSION_LABEL}"]`);
  s.eq(b.status?.current, old, 'status.current after the rollback');

  const c = await s.boot('r-rolled-back', `${MARKERS}${POWEROFF}`);
  s.clean(c, 'boot after the rollback');
  s.rootIs(c, old, 'after the rollback');
  s.check(/No such file/.test(c.results.get('etc-marker') ?? ''), `the old tree has no /etc/os-v2 after the rollback: ${c.results.get('etc-marker')}`);
  s.check(/No such file/.test(c.results.get('usr-marker') ?? ''), `the old tree has no /usr/lib/os-v2 after the rollback: ${c.results.get('usr-marker')}`);
  s.eq(c.status?.booted, old, 'status.booted after the rollback');
  s.eq(c.status?.current, old, 'status.current after the rollback');
  return s;
}
