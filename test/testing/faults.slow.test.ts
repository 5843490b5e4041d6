/**
 * Fault injection is not a product feature: killAfter and countingHook come from
 * stagedroot/testing only, and STAGEDROOT_FAULT_KILL_AFTER kills only the test-only CLI
 * entry (src/testing/crash-cli.ts), never the `stagedroot` program.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as main from '../../src/index.js';
import * as testing from '../../src/testing/index.js';
import { buildTree } from '../../src/testing/index.js';
import { requireDist } from '../helpers/crash.js';
import { CLI, CRASH_CLI } from '../helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let dir: string;
let tree: string;

beforeAll(() => {
  requireDist();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-faults-'));
  tree = buildTree(path.join(dir, 'tree'), { 'usr/bin/true': 'x', 'etc/hostname': 'node\n' });
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function init(entry: string, sysroot: string) {
  return spawnSync(process.execPath, [entry, 'init', '--sysroot', sysroot, '--from', tree], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_FAULT_KILL_AFTER: '3' } });
}

describe('fault injection', () => {
  it('is not exported from the main entry, only from stagedroot/testing', () => {
    expect(Object.keys(main)).not.toContain('killAfter');
    expect(Object.keys(main)).not.toContain('countingHook');
    expect(typeof testing.killAfter).toBe('function');
    expect(typeof testing.countingHook).toBe('function');
  });

  it('the production CLI ignores STAGEDROOT_FAULT_KILL_AFTER: init completes', () => {
    const sysroot = path.join(dir, 'prod');
    const r = init(CLI, sysroot);
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(fs.existsSync(path.join(sysroot, 'state.json'))).toBe(true);
  });

  it('the test-only CLI honours it: SIGKILLed after the 3rd mutation, nothing after it', () => {
    const r = init(CRASH_CLI, path.join(dir, 'crash'));
    expect(r.signal).toBe('SIGKILL');
    expect(r.stdout).toBe('');
  });

  it('no module outside src/testing reads the knob or kills the process', () => {
    const offenders: string[] = [];
    for (const rel of fs.readdirSync(path.join(ROOT, 'src'), { recursive: true }) as string[]) {
      if (!rel.endsWith('.ts') || rel.startsWith(`testing${path.sep}`)) continue;
      const text = fs.readFileSync(path.join(ROOT, 'src', rel), 'utf8');
      if (/STAGEDROOT_FAULT|process\.kill\(process\.pid/.test(text)) offenders.push(rel);
    }
    expect(offenders).toEqual([]);
  });
});
