import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { tool, toolPackages, toolSync } from '../helpers/tools.js';

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/test-setup.sh');
/** A PATH with bash and coreutils but none of the tests' tools. */
const BARE = { PATH: '/nonexistent' };

/**
 * The script copied where an unprivileged user can read it: the clone itself may sit under
 * a directory only root may enter (a `mktemp -d`, root's home), where uid 65534 would get
 * bash's exit 126 instead of the script's own answer. The script sources nothing else.
 */
function readableCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-setup-script-'));
  fs.chmodSync(dir, 0o755);
  const copy = path.join(dir, 'test-setup.sh');
  fs.copyFileSync(SCRIPT, copy);
  fs.chmodSync(copy, 0o644);
  copies.push(dir);
  return copy;
}
const copies: string[] = [];
afterAll(() => {
  for (const dir of copies) fs.rmSync(dir, { recursive: true, force: true });
});

describe('scripts/test-setup.sh', () => {
  it('is a no-op where every tool is installed (this machine): exit 0, nothing printed', async () => {
    const r = await execa('bash', [SCRIPT], { reject: false });
    expect(r.stderr + r.stdout).toBe('');
    expect(r.exitCode).toBe(0);
  });

  it('--check lists what is missing and fails, installing nothing', async () => {
    const r = await execa('/bin/bash', [SCRIPT, '--check'], { env: BARE, extendEnv: false, reject: false });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/^test-setup: missing Debian packages: .*\bsignify-openbsd\b/);
    expect(r.stderr).toMatch(/\bshellcheck\b/);
  });

  it('not as root: stops, lists the packages and the one command that installs them', async () => {
    const copy = readableCopy();
    const r = await execa('/usr/bin/setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '/bin/bash', copy], { env: BARE, extendEnv: false, reject: false });
    expect(r.stderr).not.toMatch(/Permission denied/);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('the tests need these Debian packages, which are not installed');
    expect(r.stderr).toMatch(/sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends [^']*\bminisign\b[^']*'/);
  });

  it('as root: installs what is missing in one apt-get install, without recommends', async () => {
    // apt-get stands in by a stub that records its arguments; nothing is installed.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-setup-apt-'));
    copies.push(dir);
    const log = path.join(dir, 'apt-get.log');
    fs.writeFileSync(path.join(dir, 'apt-get'), `#!/bin/sh\necho "$*" >> ${log}\n`, { mode: 0o755 });
    const r = await execa('/bin/bash', [SCRIPT], { env: { PATH: dir }, extendEnv: false, reject: false });
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(/^test-setup: installing .*\bminisign\b/);
    const calls = fs.readFileSync(log, 'utf8').trimEnd().split('\n');
    expect(calls[0]).toBe('update -qq');
    expect(calls.slice(1)).toHaveLength(1);
    expect(calls[1]).toMatch(/^install -y -qq --no-install-recommends .*\bminisign\b.*\bdocker-registry\b/);
  });

  it('names each command with the Debian package that installs it (checked with dpkg on this machine)', async () => {
    const map = toolPackages();
    expect(map.size).toBeGreaterThan(20);
    const r = await execa('dpkg', ['-S', ...[...map.keys()].map((cmd) => `bin/${cmd}`)], { reject: false });
    for (const [cmd, pkg] of map) {
      const owners = r.stdout.split('\n').filter((l) => l.endsWith(`/${cmd}`)).flatMap((l) => l.split(':')[0]!.split(', '));
      expect(owners, cmd).toContain(pkg);
    }
  });
});

describe('the tests\' tool runner', () => {
  it('runs a tool', async () => {
    expect((await tool('minisign', ['-v'], { reject: false })).stdout).toMatch(/minisign/i);
  });

  it('names the Debian package of a tool that is not installed, not ENOENT', async () => {
    const env = { PATH: '/nonexistent' };
    await expect(tool('signify-openbsd', ['-h'], { env, extendEnv: false })).rejects.toThrow(/^signify-openbsd is not installed \(Debian package signify-openbsd\); run scripts\/test-setup.sh as root/);
    await expect(tool('shellcheck', [], { env, extendEnv: false, reject: false })).rejects.toThrow(/Debian package shellcheck/);
    expect(() => toolSync('mkfs.xfs', [], { env, extendEnv: false })).toThrow(/Debian package xfsprogs/);
    expect(() => toolSync('no-such-tool-x', [], { env, extendEnv: false })).toThrow(/no package in scripts\/test-setup.sh/);
  });
});
