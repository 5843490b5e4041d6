/**
 * The package's public surface is what users need: every export of the main entry is
 * named in the README or docs/ (docs/library.md lists them by concern), and every name
 * docs/library.md lists is exported, from the main entry or from stagedroot/testing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as main from '../../src/index.js';
import * as testing from '../../src/testing/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (rel: string) => fs.readFileSync(path.join(root, rel), 'utf8');

/** The names an entry exports, values and types, from its `export { … } from` lines. */
function exportedNames(rel: string): string[] {
  const names: string[] = [];
  for (const m of read(rel).matchAll(/^export (?:type )?\{([^}]*)\}/gm)) for (const n of m[1]!.split(',')) if (n.trim()) names.push(n.trim().replace(/^type\s+/, ''));
  return names;
}

const mainNames = exportedNames('src/index.ts');
const docs = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)].map(read).join('\n');

describe('the public surface', () => {
  it('reads every export of the main entry (the runtime values are all among them)', () => {
    expect(mainNames.length).toBeGreaterThan(50);
    expect(Object.keys(main).filter((k) => !mainNames.includes(k))).toEqual([]);
  });

  it('names every export of the main entry in the README or docs/', () => {
    expect(mainNames.filter((n) => !new RegExp(`\\b${n}\\b`).test(docs))).toEqual([]);
  });

  it('exports every name docs/library.md lists', () => {
    const listed = [...read('docs/library.md').matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1]!);
    const known = new Set([...mainNames, ...exportedNames('src/testing/index.ts'), ...Object.keys(testing)]);
    expect(listed.length).toBeGreaterThan(50);
    expect(listed.filter((n) => !known.has(n))).toEqual([]);
  });

  it('keeps internals out: no byte-level helpers of the state, the planner or fault injection', () => {
    for (const n of ['readManifest', 'parseBootEntry', 'detectKind', 'updateSpecSchema', 'checkMachineConfig', 'machineConfigDocumentSource', 'PACKAGE_DBS', 'FaultHook', 'killAfter']) expect(mainNames).not.toContain(n);
  });
});
