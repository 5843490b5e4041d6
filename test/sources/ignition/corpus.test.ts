import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashTree } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { HOSTILE_BASE_TREE, hostileCases, writeHostileCorpus } from '../../../fixtures/ignition/hostile-cases.js';
import { ignitionEnv, type Env } from './ignition-helpers.js';

let env: Env;
let corpus: ReturnType<typeof writeHostileCorpus>;
beforeAll(async () => {
  env = await ignitionEnv(HOSTILE_BASE_TREE);
  corpus = writeHostileCorpus(path.join(env.scratch, 'hostile-ignition'));
});
afterAll(() => env?.cleanup());

describe('the hostile Ignition corpus, through `stagedroot stage`', () => {
  it('has one file per case and its expectations', () => {
    const expected = JSON.parse(fs.readFileSync(path.join(env.scratch, 'hostile-ignition/expected.json'), 'utf8'));
    expect(Object.keys(expected)).toHaveLength(corpus.cases.length);
    expect(corpus.cases.length).toBeGreaterThanOrEqual(45);
    console.info(`hostile Ignition corpus: ${corpus.cases.length} cases`);
  });

  it.each(hostileCases().map((c) => [c.name, c] as const))('%s: exit 3, names the entry, changes nothing', async (name, c) => {
    const booted = hashTree(env.booted);
    const canary = hashTree(env.canary);
    const r = await cli(['stage', path.join(env.scratch, 'hostile-ignition', `${name}.ign`), '--sysroot', env.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(3);
    const out = JSON.parse(r.out) as { ok: boolean; error: { code: string; path?: string; message: string } };
    expect(out.error.code, out.error.message).toBe(c.code);
    if (c.path !== '') expect(out.error.path ?? '', out.error.message).toBe(c.path);
    expect(hashTree(env.booted)).toBe(booted);
    expect(hashTree(env.canary)).toBe(canary);
    const st = await cli(['status', '--json', '--sysroot', env.dir]);
    expect(JSON.parse(st.out).staged).toBeNull();
  });
});
