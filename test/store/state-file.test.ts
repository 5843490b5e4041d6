import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { Layout } from '../../src/state/layout.js';
import { loadState, saveState } from '../../src/store/state-file.js';
import { stateSchema } from '../../src/state/schema.js';
import { DurableFs } from '../../src/fs/trees/durable.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { motdUpdate } from '../helpers/trees.js';

describe('the state file', () => {
  let t: TempSysroot;
  afterEach(() => t?.cleanup());

  async function withStaged(): Promise<{ stateFile: string; bak: string; good: string }> {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    await t.sysroot.stage(motdUpdate('A'));
    const stateFile = path.join(t.dir, 'state.json');
    const bak = path.join(t.dir, 'state.json.bak');
    const good = fs.readFileSync(stateFile, 'utf8');
    expect(fs.readFileSync(bak, 'utf8')).toBe(good); // the copy follows every write
    return { stateFile, bak, good };
  }

  it('recovers a corrupt state.json from the last good copy, says so, and moves the broken file aside', async () => {
    const { stateFile, good } = await withStaged();
    fs.writeFileSync(stateFile, '{"version": 1, "current": "00');
    // Readers see the good copy and are warned; they write nothing.
    const warnings: string[] = [];
    const reader = await Sysroot.open(t.dir, { onWarning: (w) => warnings.push(w) });
    expect(reader.recovery.join('\n')).toMatch(/state\.json was unreadable .*not valid JSON.*moved it to .*state\.json\.broken-.*restored the last good copy/);
    expect(warnings.join('\n')).toContain('recovery: state.json was unreadable');
    expect(reader.status().staged).toBe('0002');
    const aside = fs.readdirSync(t.dir).filter((n) => n.startsWith('state.json.broken-'));
    expect(aside).toHaveLength(1);
    expect(fs.readFileSync(path.join(t.dir, aside[0]!), 'utf8')).toBe('{"version": 1, "current": "00');
    expect(JSON.parse(fs.readFileSync(stateFile, 'utf8'))).toEqual(JSON.parse(good));
    // The lifecycle goes on.
    await expect(reader.finalize()).resolves.toMatchObject({ finalized: true, id: '0002' });
  });

  it('treats a state.json that parses but breaks the schema as corrupt too', async () => {
    const { stateFile } = await withStaged();
    fs.writeFileSync(stateFile, JSON.stringify({ version: 1, current: 'not-an-id' }));
    const s = await Sysroot.open(t.dir);
    expect(s.recovery[0]).toMatch(/does not match the state schema: current: a deployment id is four or more digits/);
    expect(s.status().current).toBe('0001');
  });

  it('a read-only status of a corrupt state shows the copy with a warning and writes nothing', async () => {
    const { stateFile } = await withStaged();
    const warnings: string[] = [];
    const s = await Sysroot.open(t.dir, { onWarning: (w) => warnings.push(w) });
    fs.writeFileSync(stateFile, 'garbage');
    expect(s.status().staged).toBe('0002');
    expect(warnings[0]).toMatch(/state\.json is unreadable .*showing the last good copy/);
    expect(fs.readFileSync(stateFile, 'utf8')).toBe('garbage');
  });

  it('restores a missing state.json from the copy', async () => {
    const { stateFile, good } = await withStaged();
    fs.unlinkSync(stateFile);
    const s = await Sysroot.open(t.dir);
    expect(s.recovery).toContain('state.json was missing; restored the last good copy');
    expect(fs.readFileSync(stateFile, 'utf8')).toBe(good);
  });

  it('with both files corrupt, fails with STATE_CORRUPT naming the file, and resets nothing', async () => {
    const { stateFile, bak } = await withStaged();
    fs.writeFileSync(stateFile, '{');
    fs.writeFileSync(bak, '[]');
    const err = await Sysroot.open(t.dir).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STATE_CORRUPT', path: stateFile });
    expect(String((err as Error).message)).toContain(stateFile);
    expect(String((err as Error).message)).toContain(bak);
    expect(fs.readFileSync(stateFile, 'utf8')).toBe('{');
    expect(fs.readFileSync(bak, 'utf8')).toBe('[]');
    expect(() => t.sysroot.status()).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT' }));
  });

  it('with state.json missing and the copy corrupt, names the copy', async () => {
    const { stateFile, bak } = await withStaged();
    fs.unlinkSync(stateFile);
    fs.writeFileSync(bak, 'nope');
    await expect(Sysroot.open(t.dir)).rejects.toMatchObject({ code: 'STATE_CORRUPT', path: bak });
  });

  it('a directory without state is not a sysroot', async () => {
    t = await tempSysroot();
    await expect(Sysroot.open(t.scratch)).rejects.toMatchObject({ code: 'NOT_A_SYSROOT', path: t.scratch });
  });

  it('saveState validates what it writes and writes the copy after the state', async () => {
    t = await tempSysroot();
    const layout = new Layout(t.dir);
    const { state } = loadState(layout);
    const dfs = new DurableFs();
    expect(() => saveState(layout, dfs, { ...state, current: 'x' })).toThrow();
    const writes: string[] = [];
    saveState(layout, new DurableFs({ afterMutation: (op, p) => writes.push(`${op} ${path.basename(p)}`) }), { ...state, bootTries: 5 });
    expect(writes.filter((w) => w.startsWith('rename'))).toEqual(['rename state.json', 'rename state.json.bak']);
    expect(loadState(layout).state.bootTries).toBe(5);
    expect(fs.readdirSync(t.dir).filter((n) => n.includes('tmp-'))).toEqual([]);
  });

  it('a text read again is the schema\'s answer again: the same data, a fresh object, and a rejected text still rejected', async () => {
    t = await tempSysroot();
    const layout = new Layout(t.dir);
    const good = fs.readFileSync(layout.stateFile, 'utf8');
    const first = loadState(layout).state;
    expect(first).toEqual(stateSchema.parse(JSON.parse(good)));
    // Defaults the schema fills in (locked, lastId) are there on a second read too.
    const raw = JSON.parse(good) as { lastId?: string; deployments: { locked?: boolean }[] };
    delete raw.lastId;
    delete raw.deployments[0]!.locked;
    fs.writeFileSync(layout.stateFile, JSON.stringify(raw));
    const filled = loadState(layout).state;
    const again = loadState(layout).state;
    expect(again).toEqual(filled);
    expect(again).toEqual(stateSchema.parse(raw));
    expect(again).not.toBe(filled);
    expect(again.deployments[0]!.locked).toBe(false);
    again.deployments[0]!.label = 'changed by a caller';
    expect(loadState(layout).state.deployments[0]!.label).toBe(filled.deployments[0]!.label);
    // Texts the schema rejects (a wrong id, an unknown key) are rejected at every read, after an accepted one and before it.
    fs.writeFileSync(layout.stateBackup, '[]');
    for (const bad of [JSON.stringify({ ...raw, current: 'x' }), JSON.stringify({ ...raw, extra: 1 }), good.replace('"version": 1', '"version": 2')]) {
      expect(stateSchema.safeParse(JSON.parse(bad)).success).toBe(false);
      for (let i = 0; i < 2; i++) {
        fs.writeFileSync(layout.stateFile, good);
        expect(loadState(layout).state).toEqual(first);
        fs.writeFileSync(layout.stateFile, bad);
        expect(() => loadState(layout)).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT' }));
      }
    }
  });
});
