import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fieldPath, formatIssues, issuesError, StagedrootError } from '../../src/errors.js';
import { MAX_DOCUMENT_BYTES, readJsonDocument } from '../../src/sources/document.js';
import { parseUpdateSpec } from '../../src/sources/spec.js';
import { parseIgnition } from '../../src/sources/ignition/parse.js';
import { tempSysroot } from '../../src/testing/index.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const errorOf = (f: () => unknown): StagedrootError => {
  try {
    f();
  } catch (e) {
    if (e instanceof StagedrootError) return e;
    throw e;
  }
  throw new Error('expected a StagedrootError');
};

describe('one field-path style and one issue formatter', () => {
  it('writes paths zod-like: a[2].b, quoting keys that are not identifiers', () => {
    expect(fieldPath(['storage', 'files', 2, 'contents', 'source'])).toBe('storage.files[2].contents.source');
    expect(fieldPath([0, 'a'])).toBe('[0].a');
    expect(fieldPath(['units', 'a b', 'x.y'])).toBe('units["a b"]["x.y"]');
    expect(fieldPath([])).toBe('');
  });

  it('is the same for the native spec and Ignition', () => {
    const spec = errorOf(() => parseUpdateSpec({ files: [{ path: '/a', contents: 'x' }, { path: '/b', contents: 'y', mode: 'rwx' }] }));
    const ign = errorOf(() => parseIgnition({ ignition: { version: '3.2.0' }, storage: { files: [{ path: '/a' }, { path: '/b', mode: 'rwx' }] } }, 'test'));
    expect(spec.issues.map((i) => i.path)).toEqual(['files[1].mode']);
    expect(ign.issues.map((i) => i.path)).toEqual(['storage.files[1].mode']);
    // One formatter: both messages list the issues the same way.
    for (const e of [spec, ign]) expect(e.message).toContain(formatIssues(e.issues));
    expect(spec.message).toMatch(/^The update spec is invalid: 1 problem:\n {2}error SPEC_INVALID at files\[1\]\.mode: /);
  });

  it('takes the gravest code, and warnings ride along without choosing it', () => {
    const e = issuesError([
      { code: 'UNKNOWN_FIELD', path: 'x', message: 'ignored', severity: 'warning' },
      { code: 'SPEC_INVALID', path: 'a', message: 'bad', severity: 'error' },
      { code: 'PATH_ESCAPE', path: 'b', message: 'escapes', severity: 'error' },
    ], 'The doc');
    expect([e.code, e.path, e.issues.length]).toEqual(['PATH_ESCAPE', 'a', 3]);
    expect(e.message).toBe('The doc: 2 problems:\n  error SPEC_INVALID at a: bad\n  error PATH_ESCAPE at b: escapes');
  });
});

describe('one JSON-document reader', () => {
  it('reads JSON, refuses text that is not JSON (SPEC_INVALID) and a missing file (USAGE)', () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-doc-'));
    fs.writeFileSync(path.join(dir, 'ok.json'), '{"a": [1]}');
    fs.writeFileSync(path.join(dir, 'bad.json'), '{"a": ');
    expect(readJsonDocument(path.join(dir, 'ok.json'), 'The doc')).toEqual({ a: [1] });
    const bad = errorOf(() => readJsonDocument(path.join(dir!, 'bad.json'), 'The doc'));
    expect([bad.code, bad.isRejection, bad.issues[0]?.message]).toEqual(['SPEC_INVALID', true, expect.stringMatching(/^not valid JSON: /)]);
    expect(errorOf(() => readJsonDocument(path.join(dir!, 'missing.json'), 'The doc')).code).toBe('USAGE');
  });

  it('refuses a document over the 64 MiB cap without parsing it (UNSAFE_ENTRY)', () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-doc-'));
    const big = path.join(dir, 'big.json');
    fs.writeFileSync(big, '');
    fs.truncateSync(big, MAX_DOCUMENT_BYTES + 1); // sparse: no 64 MiB written
    expect(MAX_DOCUMENT_BYTES).toBe(64 * 1024 * 1024);
    expect(errorOf(() => readJsonDocument(big, 'The doc')).code).toBe('UNSAFE_ENTRY');
  });
});

describe('JSON inside an archive', () => {
  it('is read by the same reader: an OCI layout whose index.json is not JSON is SOURCE_CORRUPT, naming index.json', async () => {
    const t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    try {
      const layout = path.join(t.scratch, 'layout');
      fs.mkdirSync(layout);
      fs.writeFileSync(path.join(layout, 'oci-layout'), '{"imageLayoutVersion": "1.0.0"}');
      fs.writeFileSync(path.join(layout, 'index.json'), '{"schemaVersion": 2,');
      const e = await t.sysroot.stage(layout).then(() => null, (err: unknown) => err as StagedrootError);
      expect([e?.code, e?.path, e?.isRejection]).toEqual(['SOURCE_CORRUPT', 'index.json', true]);
      expect(e?.issues).toEqual([expect.objectContaining({ code: 'SOURCE_CORRUPT', message: expect.stringMatching(/^not valid JSON: /) })]);
      expect(e?.message).toContain('index.json: 1 problem');
    } finally {
      t.cleanup();
    }
  });
});
