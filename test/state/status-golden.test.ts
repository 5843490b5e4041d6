/**
 * Golden `status --json` output for the main states of a sysroot. The output is
 * normalised (the temp directory becomes <tmp>, timestamps become <time>) and compared
 * as text with fixtures/status/NAME.json, so adding, removing, renaming or changing any
 * field fails here. After a deliberate change of the status format, regenerate with
 * UPDATE_GOLDEN=1 and review the diff of fixtures/status/.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

const GOLDEN = path.resolve(import.meta.dirname, '../../fixtures/status');
const UPDATE = process.env.UPDATE_GOLDEN === '1';
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

let t: TempSysroot;
const snapshots = new Map<string, string>();

function normalise(value: unknown, base: string): unknown {
  if (typeof value === 'string') return ISO_TIME.test(value) ? '<time>' : value.split(base).join('<tmp>');
  if (Array.isArray(value)) return value.map((v) => normalise(v, base));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(v, base)]));
  return value;
}

async function snapshot(name: string): Promise<void> {
  const r = await cli(['status', '--json', '--sysroot', t.dir]);
  expect(r.code, r.err).toBe(0);
  snapshots.set(name, JSON.stringify(normalise(JSON.parse(r.out), path.dirname(t.dir)), null, 2) + '\n');
}

async function rejected(p: Promise<unknown>): Promise<StagedrootError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(StagedrootError);
  return err as StagedrootError;
}

beforeAll(async () => {
  t = await tempSysroot({ tree: { 'etc/os-release': 'ID=golden\n', 'etc/motd': 'base\n', 'usr/bin/app': '#!/bin/sh\n' } });
  const s = t.sysroot;
  await snapshot('fresh-init');

  await s.stage({ label: 'web-1', files: [{ path: '/etc/motd', contents: 'web 1\n' }] });
  await snapshot('staged');

  await s.finalize();
  await snapshot('pending-reboot');

  await s.boot();
  await s.markGood();
  await s.rollback();
  await snapshot('rollback-queued');

  await s.rollback(); // back to web-1 as current (booted already)
  await s.stage({ label: 'web-2', files: [{ path: '/etc/motd', contents: 'web 2\n' }] });
  await s.finalize();
  await s.boot();
  await s.markBad('app did not answer on :80', { phase: 'health', output: 'curl: (7) Failed to connect\n' });
  await snapshot('marked-bad');

  const junk = path.join(t.scratch, 'junk.bin');
  fs.writeFileSync(junk, 'PK\x03\x04 not an update');
  expect((await rejected(s.stage(junk, { label: 'junk' }))).code).toBe('SOURCE_UNSUPPORTED');
  await snapshot('last-failure');

  const noMotd = { name: 'no-motd', run: () => [{ code: 'MOTD', path: 'etc/motd', message: 'motd is managed elsewhere', severity: 'error' as const }] };
  expect((await rejected(s.stage({ label: 'web-3', files: [{ path: '/etc/motd', contents: 'web 3\n' }] }, { validators: [noMotd] }))).code).toBe('VALIDATION_FAILED');
  await snapshot('failed-deployment-kept');
}, 120_000);

afterAll(() => t?.cleanup());

describe('status --json golden files (fixtures/status/)', () => {
  const names = ['fresh-init', 'staged', 'pending-reboot', 'rollback-queued', 'marked-bad', 'last-failure', 'failed-deployment-kept'];

  it.each(names)('%s matches its fixture in fixtures/status/, field for field', (name) => {
    const actual = snapshots.get(name);
    expect(actual, `snapshot ${name} was taken`).toBeDefined();
    const file = path.join(GOLDEN, `${name}.json`);
    if (UPDATE) {
      fs.mkdirSync(GOLDEN, { recursive: true });
      fs.writeFileSync(file, actual!);
      console.warn(`UPDATE_GOLDEN=1: wrote ${file}; review the diff`);
    }
    expect(fs.existsSync(file), `${file} exists (regenerate with UPDATE_GOLDEN=1)`).toBe(true);
    expect(actual).toBe(fs.readFileSync(file, 'utf8'));
  });

  it('has no fixture without a state that produces it', () => {
    expect(fs.readdirSync(GOLDEN).sort()).toEqual(names.map((n) => `${n}.json`).sort());
  });
});
