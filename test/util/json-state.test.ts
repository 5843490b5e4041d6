/**
 * One reader for the JSON files stagedroot writes (readJsonState beside writeJson, on
 * parseJsonState): each file's reader gives null for an absent file and STATE_CORRUPT
 * naming the file, in the same words, for text that is not JSON or not its schema.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readFleetLockConfig } from '../../src/fleetlock/config.js';
import { parseDelta } from '../../src/fs/manifests/delta.js';
import { parseSharedOps } from '../../src/persistent-dirs/ops.js';
import { readConfigRecord } from '../../src/store/config-record.js';
import { parseJsonState } from '../../src/util/json-state.js';
import { z } from 'zod';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-json-state-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Each reader, with the file it reads in `d` and the schema's name in its message. */
const readers: { name: string; file: string; what: string; read: (d: string) => unknown }[] = [
  { name: 'FleetLock settings', file: 'fleetlock.json', what: 'FleetLock settings', read: (d) => readFleetLockConfig(d) },
  { name: 'config record', file: 'config.json', what: 'config record', read: (d) => readConfigRecord(d) },
  { name: 'delta', file: 'delta.json', what: 'delta', read: (d) => parseDelta(fs.readFileSync(path.join(d, 'delta.json'), 'utf8'), path.join(d, 'delta.json')) },
  { name: 'shared ops', file: 'shared-ops.json', what: 'shared-ops', read: (d) => parseSharedOps(fs.readFileSync(path.join(d, 'shared-ops.json'), 'utf8'), path.join(d, 'shared-ops.json')) },
];

describe.each(readers)('$name', ({ file, what, read }) => {
  it('is STATE_CORRUPT naming the file for text that is not JSON, with the parse error', () => {
    const d = fs.mkdtempSync(path.join(dir, 'x-'));
    fs.writeFileSync(path.join(d, file), '{"half":');
    expect(() => read(d)).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT', path: path.join(d, file), message: expect.stringMatching(new RegExp(`^${path.join(d, file)} is not valid JSON \\(.+\\)$`)) }));
  });

  it('is STATE_CORRUPT naming the file and the field for JSON that breaks the schema', () => {
    const d = fs.mkdtempSync(path.join(dir, 'y-'));
    fs.writeFileSync(path.join(d, file), JSON.stringify({ unexpected: 1 }));
    expect(() => read(d)).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT', path: path.join(d, file), message: expect.stringContaining(`${path.join(d, file)} does not match the ${what} schema: `) }));
  });
});

it('an absent settings file or config record is null, not an error', () => {
  const d = fs.mkdtempSync(path.join(dir, 'z-'));
  expect(readFleetLockConfig(d)).toBeNull();
  expect(readConfigRecord(d)).toBeNull();
});

it('names at most three issues, each with its field path', () => {
  const schema = z.object({ a: z.string(), b: z.object({ c: z.number() }), d: z.boolean(), e: z.null() }).strict();
  expect(() => parseJsonState('{"b":{}}', '/x.json', schema, 'test')).toThrow('/x.json does not match the test schema: a: Required; b.c: Required; d: Required');
});
