/**
 * A spec or Ignition file is read once, by detection: what is planned (and what its
 * signature is checked against) is the very content its kind was decided from, even when
 * the file changes after detection; the size cap and the messages naming the file hold.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChangeOp } from '../../src/changeset.js';
import { StagedrootError } from '../../src/errors.js';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { detectKind, sourceFromPath } from '../../src/sources/detect.js';
import { MAX_DOCUMENT_BYTES } from '../../src/sources/document.js';
import type { Source } from '../../src/sources/source.js';
import { buildTree } from '../../src/testing/index.js';
import { BASE_TREE } from '../helpers/trees.js';

const SPEC = JSON.stringify({ label: 'detected', files: [{ path: '/etc/motd', contents: 'from the detected spec\n' }] });
const OTHER_SPEC = JSON.stringify({ label: 'swapped', files: [{ path: '/etc/swapped', contents: 'written after detection\n' }] });
const IGNITION = JSON.stringify({ ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/ign.conf', contents: { source: 'data:,from%20the%20detected%20config%0A' } }] } });

let dir: string;
let base: ReadOnlyTree;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-detect-'));
  base = new ReadOnlyTree(buildTree(path.join(dir, 'base'), BASE_TREE));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Where a change set writes, with the text it writes ("/etc/motd: ..."). */
async function writes(s: Source): Promise<string[]> {
  const cs = await s.plan(base);
  const out: string[] = [];
  for await (const op of cs.ops as AsyncIterable<ChangeOp>) {
    if (op.op === 'write' && op.content.kind === 'bytes') out.push(`${op.path}: ${Buffer.from(op.content.data).toString('utf8')}`);
  }
  return out;
}

/** The bytes a source's detached signature is checked against. */
async function signedBytes(s: Source): Promise<string> {
  const info = await s.inspect!();
  const chunks: Uint8Array[] = [];
  for await (const c of info.signed!.payload.chunks()) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

const rejection = async (p: Promise<unknown>): Promise<StagedrootError> => {
  const e = await p.then(() => null, (err: unknown) => err);
  expect(e).toBeInstanceOf(StagedrootError);
  return e as StagedrootError;
};

describe('a spec or Ignition file is read once, by detection', () => {
  it('a spec: the plan and the signature are of the content detected, not of what the file holds later', async () => {
    const p = path.join(dir, 'update.json');
    fs.writeFileSync(p, SPEC);
    const s = sourceFromPath(p);
    expect(s.kind).toBe('spec');
    fs.writeFileSync(p, OTHER_SPEC); // replaced in place after detection
    expect(await writes(s)).toEqual(['etc/motd: from the detected spec\n']);
    expect(await signedBytes(s)).toBe(SPEC);
    fs.rmSync(p); // and gone: nothing reads it again
    expect(await writes(s)).toEqual(['etc/motd: from the detected spec\n']);
  });

  it('an Ignition config swapped for a spec after detection is still planned as the config detected', async () => {
    const p = path.join(dir, 'config.ign');
    fs.writeFileSync(p, IGNITION);
    const s = sourceFromPath(p);
    expect(s.kind).toBe('ignition');
    fs.writeFileSync(`${p}.new`, OTHER_SPEC);
    fs.renameSync(`${p}.new`, p);
    expect((await writes(s)).filter((w) => w.startsWith('etc/ign.conf'))).toEqual(['etc/ign.conf: from the detected config\n']);
    expect(await signedBytes(s)).toBe(IGNITION);
  });

  it('keeps the 64 MiB cap at detection (UNSAFE_ENTRY naming the file) and names the file when its JSON is invalid', async () => {
    const big = path.join(dir, 'big.json');
    fs.writeFileSync(big, '{"files": [');
    fs.truncateSync(big, MAX_DOCUMENT_BYTES + 1); // sparse
    let e: unknown;
    try {
      detectKind(big);
    } catch (err) {
      e = err;
    }
    expect(e).toMatchObject({ code: 'UNSAFE_ENTRY', path: big, message: expect.stringContaining(big) });

    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, '{"files": [');
    const spec = await rejection(sourceFromPath(bad).plan(base));
    expect([spec.code, spec.message]).toEqual(['SPEC_INVALID', expect.stringContaining(`The update spec ${bad}`)]);
    fs.writeFileSync(bad, '{"ignition": {"version": "3.4.0"},');
    const ign = await rejection(sourceFromPath(bad).plan(base));
    expect([ign.code, ign.message]).toEqual(['SPEC_INVALID', expect.stringContaining(`The Ignition config ${bad}`)]);
  });
});
