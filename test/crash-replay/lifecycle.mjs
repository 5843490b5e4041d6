// What the guest runs on the logged device, and the base image the log starts from.
//
// The base (built on the host): the filesystem made, a sysroot at /sysroot in it made by
// `stagedroot init` from a small tree, its shared /var holding var/lib/replay. The guest
// then puts the scratch disk under a log-writes target and runs the lifecycle with the
// CLI, one mark after each operation. Before each mark a file is written to the shared
// /var and synced (file and directory): the replay checks that every such file of a mark
// the log has reached is there.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ESP_STEPS, ESP_SYSROOT, espSetup, espTeardown } from './esp-lifecycle.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const CLI = path.resolve(HERE, '../../dist/cli/main.js');

/** Where the sysroot lives on the replayed filesystem (not its root: ext4's lost+found). */
export const SYSROOT_DIR = 'sysroot';
/** The shared /var's directory the lifecycle writes its synced files into. */
export const VAR_DIR = 'shared/var/lib/replay';
/** Trees the lifecycle edits as a running system would (local edits the merge carries). */
export const LOCAL_EDIT_PATHS = ['etc'];

export const FILESYSTEMS = {
  // XFS refuses filesystems under 300 MiB.
  ext4: { size: 256 << 20, mkfs: (img) => ['mkfs.ext4', ['-q', '-F', img]], modules: '' },
  xfs: { size: 320 << 20, mkfs: (img) => ['mkfs.xfs', ['-q', '-f', img]], modules: 'xfs' },
};

function run(cmd, args) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

/** The booted tree of the base: a small OS-like tree (~70 files), usr/ and etc/. */
function writeTree(dir) {
  const files = {
    'etc/os-release': 'ID=replay\nVERSION_ID=1\n',
    'etc/hostname': 'replay-node\n',
    'etc/app.conf': 'enabled=0\n',
    'etc/ssh/sshd_config': 'PermitRootLogin no\n',
    'usr/bin/tool': '#!/bin/sh\necho tool\n',
    'usr/lib/os-release': 'ID=replay\nVERSION_ID=1\n',
  };
  for (let i = 0; i < 40; i++) files[`usr/share/doc/pkg${i}/README`] = `package ${i}\n`.repeat(40);
  for (let i = 0; i < 20; i++) files[`etc/conf.d/${i}.conf`] = `option${i}=yes\n`;
  files['usr/lib/libbig.so'] = 'x'.repeat(256 << 10);
  for (const [p, c] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    fs.writeFileSync(path.join(dir, p), c, { mode: p.startsWith('usr/bin/') ? 0o755 : 0o644 });
  }
  fs.symlinkSync('usr/bin', path.join(dir, 'bin'));
  fs.mkdirSync(path.join(dir, 'var'));
}

/** The base image: `fsType` made on `img`, a sysroot initialized in it on a loop mount. */
export function buildBase(fsType, img, work) {
  const f = FILESYSTEMS[fsType];
  fs.rmSync(img, { force: true });
  fs.writeFileSync(img, '');
  fs.truncateSync(img, f.size);
  const [cmd, args] = f.mkfs(img);
  run(cmd, args);
  const tree = path.join(work, `${fsType}-tree`);
  fs.rmSync(tree, { recursive: true, force: true });
  writeTree(tree);
  const mnt = fs.mkdtempSync(path.join(work, `${fsType}-base-mnt-`));
  run('mount', ['-o', 'loop', img, mnt]);
  try {
    const sysroot = path.join(mnt, SYSROOT_DIR);
    run(process.execPath, [CLI, 'init', '--sysroot', sysroot, '--from', tree, '--label', 'base']);
    fs.mkdirSync(path.join(sysroot, VAR_DIR), { recursive: true });
  } finally {
    run('umount', [mnt]);
    fs.rmdirSync(mnt);
    fs.rmSync(tree, { recursive: true, force: true });
  }
}

/** A spec file the guest writes before staging it. */
const spec = (name, o) => ({ file: `/run/${name}.json`, content: `${JSON.stringify(o)}\n` });
const cli = (name, ...args) => ({ name, cli: args });
/** A local edit of the running system's /etc (the booted tree's), not synced. */
const edit = (n, file, content) => ({ edit: n, file, content });

/**
 * The lifecycle, one mark after each operation. Marks: `NN-what`; each mark's /var file is
 * VAR_DIR/NN-what holding "NN-what\n". `@op-NAME CODE` reports each CLI exit code.
 */
export const STEPS = [
  { mark: '00-mounted' },
  edit(1, 'etc/app.conf', 'enabled=1\n'),
  edit(1, 'etc/local.conf', 'local\n'),
  { mark: '01-edited' },
  spec('update', { label: 'update', files: [{ path: '/etc/motd', contents: 'update 2\n' }, { path: '/etc/app.d/new.conf', contents: 'new=1\n' }, { path: '/usr/lib/libnew.so', contents: 'y'.repeat(64 << 10) }], remove: ['/etc/conf.d/3.conf'] }),
  cli('stage', 'stage', '/run/update.json'),
  { mark: '02-staged' },
  cli('finalize', 'finalize'),
  { mark: '03-finalized' },
  cli('boot', 'boot'),
  { mark: '04-booted' },
  cli('health', 'health', '--check', 'true'),
  { mark: '05-healthy' },
  edit(2, 'etc/hostname', 'edit of the new root\n'),
  spec('bad', { label: 'bad', files: [{ path: '/etc/motd', contents: 'update 3\n' }, { path: '/usr/lib/libbad.so', contents: 'z'.repeat(32 << 10) }] }),
  cli('stage-bad', 'stage', '/run/bad.json'),
  { mark: '06-staged-bad' },
  cli('finalize-bad', 'finalize'),
  { mark: '07-finalized-bad' },
  cli('boot-bad', 'boot'),
  { mark: '08-booted-bad' },
  // The bad update's health check fails: it is marked bad (exit 1), current goes back.
  { ...cli('health-bad', 'health', '--check', 'false'), exit: 1 },
  { mark: '09-marked-bad' },
  cli('boot-back', 'boot'),
  { mark: '10-booted-back' },
  cli('rollback', 'rollback'),
  { mark: '11-rolled-back' },
  cli('boot-rollback', 'boot'),
  { mark: '12-booted-rollback' },
  spec('next', { label: 'next', files: [{ path: '/etc/motd', contents: 'update 4\n' }, { path: '/usr/bin/tool', contents: '#!/bin/sh\necho tool 4\n', mode: '0755' }] }),
  cli('stage-next', 'stage', '/run/next.json'),
  { mark: '13-staged-next' },
  cli('finalize-next', 'finalize'),
  { mark: '14-finalized-next' },
  cli('boot-next', 'boot'),
  { mark: '15-booted-next' },
  cli('health-next', 'health', '--check', 'true'),
  { mark: '16-healthy-next' },
  cli('prune', 'prune'),
  { mark: '17-pruned' },
];

/**
 * The guest's driver (node): runs STEPS on each logged filesystem in turn with the
 * installed package's CLI program (runCli, what `stagedroot` runs), in one process: under
 * TCG on a shared host, a node start per operation costs more than the operations. Marks
 * go through dmsetup. Reports "@FS.KEY VALUE" lines.
 */
const DRIVER = String.raw`
import * as fs from 'node:fs';
import { execFileSync } from 'node:child_process';
const pkg = '/usr/local/lib/node_modules/stagedroot/dist/cli';
const { runCli } = await import(pkg + '/program.js');
const { processIo } = await import(pkg + '/io.js');
const allSteps = JSON.parse(fs.readFileSync('/run/steps.json', 'utf8'));
const fsync = (p) => { const fd = fs.openSync(p, 'r'); fs.fsyncSync(fd); fs.closeSync(fd); };
const newest = (vs) => vs.sort((a, b) => a.localeCompare(b, 'en', { numeric: true })).at(-1) ?? 'none';
for (const { fsType, sysroot: S, varDir, dm, steps } of JSON.parse(fs.readFileSync('/run/lifecycles.json', 'utf8'))) {
  const io = { ...processIo, out: (t) => process.stderr.write(t), env: { ...process.env, STAGEDROOT_SYSROOT: S } };
  const V = varDir === null ? null : S + '/' + varDir;
  const r = (k, v) => process.stdout.write('@' + fsType + '.' + k + ' ' + v + '\n');
  let marks = 0;
  for (const s of allSteps[steps]) {
    const t = Date.now();
    if (s.mark) {
      if (V !== null) {
        fs.writeFileSync(V + '/' + s.mark, s.mark + '\n');
        fsync(V + '/' + s.mark);
        fsync(V);
      } else {
        // What the mark's state must boot (the ESP's log): the current deployment, each deployment's kernel.
        r('current-' + s.mark, fs.readlinkSync(S + '/current').replace(/^deploy\//, '').replace(/\/tree$/, ''));
        for (const id of fs.readdirSync(S + '/deploy').filter((d) => /^\d+$/.test(d))) {
          r('kernel-' + id, newest(fs.existsSync(S + '/deploy/' + id + '/tree/usr/lib/modules') ? fs.readdirSync(S + '/deploy/' + id + '/tree/usr/lib/modules') : []));
        }
      }
      execFileSync('dmsetup', ['message', dm, '0', 'mark', s.mark]);
      marks++;
      r('mark', s.mark);
    } else if (s.edit) {
      const id = fs.readlinkSync(S + '/current').replace(/^deploy\//, '').replace(/\/tree$/, '');
      fs.writeFileSync(S + '/current/' + s.file, s.content);
      r('edited-' + s.edit, id);
    } else if (s.file) {
      fs.writeFileSync(s.file, s.content);
    } else {
      process.stderr.write('== ' + fsType + ': stagedroot ' + s.cli.join(' ') + '\n');
      const code = await runCli(s.cli, io);
      r('op-' + s.name, code + ' ' + (s.exit ?? 0) + ' ' + ((Date.now() - t) / 1000).toFixed(1) + 's');
    }
  }
  r('marks', marks);
}
`;

/** The guest's disk for filesystem number `i`'s data (its log is the next one): /dev/vdc, vde, ... */
const disk = (n) => `/dev/vd${String.fromCharCode('c'.charCodeAt(0) + n)}`;

/**
 * The guest's script: each filesystem's scratch disk under a log-writes target (its log
 * on the next disk) and mounted, the lifecycle run on each in turn, the logs closed.
 */
export function guestScript(fsTypes) {
  const lifecycles = fsTypes.map((fsType) =>
    fsType === 'esp' ? { fsType, sysroot: ESP_SYSROOT, varDir: null, dm: 'log-esp', steps: 'esp' } : { fsType, sysroot: `/mnt/${fsType}/${SYSROOT_DIR}`, varDir: VAR_DIR, dm: `log-${fsType}`, steps: 'main' },
  );
  const setup = fsTypes.map((fsType, i) => {
    // The ESP's sysroot disk comes after its log: the ESP is the last lifecycle (run.mjs).
    if (fsType === 'esp') return espSetup(disk(2 * i), disk(2 * i + 1), disk(2 * i + 2));
    const f = FILESYSTEMS[fsType];
    return `${f.modules ? `modprobe ${f.modules} || fail "modprobe ${f.modules}"\n` : ''}n=$(blockdev --getsz ${disk(2 * i)})
dmsetup create log-${fsType} --noudevsync --table "0 $n log-writes ${disk(2 * i)} ${disk(2 * i + 1)}" || fail "dmsetup create log-${fsType}"
[ -b /dev/mapper/log-${fsType} ] || dmsetup mknodes log-${fsType}
mkdir -p /mnt/${fsType}
mount -t ${fsType} /dev/mapper/log-${fsType} /mnt/${fsType} || fail "mount ${fsType}"`;
  });
  const teardown = fsTypes.map((fsType) =>
    fsType === 'esp'
      ? espTeardown
      : `umount /mnt/${fsType} || fail "umount ${fsType}"
dmsetup remove log-${fsType} || fail "dmsetup remove log-${fsType}"`,
  );
  return `set -u
r() { printf '@%s %s\\n' "$1" "$2"; }
fail() { r error "$*"; exit 1; }
modprobe dm-log-writes || fail "modprobe dm-log-writes"
${setup.join('\n')}
cat >/run/steps.json <<'STEPS'
${JSON.stringify({ main: STEPS, esp: ESP_STEPS })}
STEPS
cat >/run/lifecycles.json <<'LIFECYCLES'
${JSON.stringify(lifecycles)}
LIFECYCLES
cat >/run/lifecycle.mjs <<'DRIVER'
${DRIVER}
DRIVER
node /run/lifecycle.mjs 2>/dev/console || fail "the lifecycle driver exited $?"
${teardown.join('\n')}
r done ok
`;
}
