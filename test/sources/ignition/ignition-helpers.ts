import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { execa } from 'execa';
import { expect } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { ignitionSource, type IgnitionOptions } from '../../../src/sources/ignition/index.js';
import { hashTree, tempSysroot, type TempSysroot, type TreeSpec } from '../../../src/testing/index.js';

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** The booted tree every Ignition test starts from: users, a home behind a symlink, units in /usr/lib and /etc. */
export const BASE_TREE: TreeSpec = {
  'etc/passwd': 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\nweb:x:1234:1235::/srv/web:/sbin/nologin\n',
  'etc/group': 'root:x:0:\ncore:x:1000:\nwww:x:4321:web\n',
  'etc/existing.conf': { content: 'old\n', mode: 0o640 },
  'etc/notadir': 'a regular file\n',
  'var/home/core': { dir: true, mode: 0o700 },
  home: { symlink: 'var/home' },
  'srv/old': { dir: true, mode: 0o755 },
  'usr/lib/systemd/system/vendor.service': '[Unit]\nDescription=vendor\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\nAlias=vendor-alias.service\n',
  'usr/lib/systemd/system/static.service': '[Service]\nExecStart=/bin/true\n',
  'etc/systemd/system/old.service': '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=old.target\nAlias=old-alias.service\n',
  'etc/systemd/system/old.target.wants/old.service': { symlink: '/etc/systemd/system/old.service' },
  'etc/systemd/system/old-alias.service': { symlink: '/etc/systemd/system/old.service' },
  'etc/systemd/system/masked.service': { symlink: '/dev/null' },
  'usr/lib/systemd/system/masked.service': '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n',
};

export function config(body: Record<string, unknown>, version = '3.2.0'): Record<string, unknown> {
  return { ignition: { version }, ...body };
}

export const pct = (s: string): string => 'data:,' + encodeURIComponent(s);
export const b64 = (s: string | Buffer, type = ''): string => `data:${type};base64,` + Buffer.from(s).toString('base64');
export const gz = (s: string | Buffer): string => b64(gzipSync(Buffer.from(s)));
export const sha = (algo: 'sha256' | 'sha512', s: string | Buffer): string => `${algo}-` + createHash(algo).update(s).digest('hex');

export interface Env extends TempSysroot {
  bootedId: string;
  booted: string;
  canary: string;
}

export async function ignitionEnv(tree: TreeSpec = BASE_TREE, o: { shared?: string[] } = {}): Promise<Env> {
  // No shared directories unless asked: these tests look at what a config writes into the tree (var/ included).
  const t = await tempSysroot({ tree, shared: o.shared ?? [] });
  const bootedId = t.sysroot.status().booted!;
  const canary = path.join(t.scratch, 'canary');
  fs.mkdirSync(canary);
  fs.writeFileSync(path.join(canary, 'keep'), 'canary\n');
  return { ...t, bootedId, booted: t.sysroot.treePath(bootedId), canary };
}

/** Stages a config and returns the staged tree (its manifest verified against the tree). */
export async function stageOk(env: Env, doc: Record<string, unknown>, opts: IgnitionOptions = {}): Promise<string> {
  const r = await env.sysroot.stage(ignitionSource(doc, opts));
  expect((await env.sysroot.verify(r.id)).drift).toEqual([]);
  return r.path;
}

/**
 * Stages a config that must be rejected (exit 3): returns the error after checking that
 * the booted tree and the canary outside the sysroot did not change and that nothing
 * was staged.
 */
export async function stageRejected(env: Env, doc: Record<string, unknown>, opts: IgnitionOptions = {}): Promise<StagedrootError> {
  const before = hashTree(env.booted);
  const canary = hashTree(env.canary);
  const err = await env.sysroot.stage(ignitionSource(doc, opts)).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StagedrootError);
  const e = err as StagedrootError;
  expect(e.isRejection, `${e.code}: ${e.message}`).toBe(true);
  expect(hashTree(env.booted)).toBe(before);
  expect(hashTree(env.canary)).toBe(canary);
  const st = env.sysroot.status();
  expect(st.staged).toBeNull();
  expect(st.lastFailure?.reason).toBe(e.message);
  return e;
}

export const issuePaths = (e: StagedrootError): string[] => e.issues.map((i) => i.path);

/** Every symlink under etc/systemd/system, as "path -> target". */
export function unitLinks(tree: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const name of fs.readdirSync(path.join(tree, rel)).sort()) {
      const r = `${rel}/${name}`;
      const st = fs.lstatSync(path.join(tree, r));
      if (st.isSymbolicLink()) out.push(`${r} -> ${fs.readlinkSync(path.join(tree, r))}`);
      else if (st.isDirectory()) walk(r);
    }
  };
  walk('etc/systemd/system');
  return out;
}

export function systemctlPath(): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir || '.', 'systemctl');
    if (fs.existsSync(p)) return p;
  }
  return null;
}

/** Runs `systemctl --root=TREE ARGS` (the reference the unit links are compared with). */
export async function systemctl(tree: string, ...args: string[]): Promise<void> {
  await execa('systemctl', [`--root=${tree}`, '--no-reload', ...args], { stdio: 'pipe' });
}

/** A copy of a tree (symlinks kept as they are) for systemctl to work on. */
export function copyTree(src: string, dst: string): string {
  fs.cpSync(src, dst, { recursive: true, verbatimSymlinks: true });
  return dst;
}
