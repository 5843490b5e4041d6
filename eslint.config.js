import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layers of src/, lowest first. A module imports only from its own layer or a lower
 * one, never upwards (rule `layers/downward-only` below). Every entry of src/ must be
 * listed: a new folder or top-level file gets its place here, or lint fails.
 */
const LAYERS = [
  ['errors.ts', 'exit-codes.ts', 'util'], // typed errors and small helpers
  ['state'], // the pure model: schema, transitions, status view, layout (no disk, no context)
  ['fs'], // the safe-fs layer: the only code that touches the disk
  ['trust', 'hooks'], // signatures and trusted keys (minisign/signify); phase hooks
  ['systemd'], // systemd units in an offline tree (names, directories, [Install]), for sources and validators
  ['changeset.ts', 'sources', 'validate'], // what an update is, and how a tree is judged
  ['context.ts', 'store', 'merge', 'machine-state'], // a sysroot on disk: state file, transition writer, recovery, removal; the /etc merge and the shared directories (recovery completes them)
  ['stage', 'commit', 'boot', 'rollback', 'gc', 'install'], // the operations, one per lifecycle step; installing on a host
  ['sysroot.ts'], // the handle: lock and recovery around every operation
  ['assess-health.ts', 'agent', 'testing', 'cli', 'index.ts'], // works on a whole sysroot; entry points
];

const here = path.dirname(fileURLToPath(import.meta.url));
const srcDir = path.join(here, 'src');
const layerOf = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i])));
const unlisted = fs.readdirSync(srcDir).filter((n) => !layerOf.has(n));
if (unlisted.length > 0) {
  throw new Error(`eslint.config.js: src/${unlisted.join(', src/')} has no place in LAYERS; add it to the layer it belongs to`);
}

/** The layer of a file under src/ (by its first path component), or undefined outside src/. */
function layerOfFile(file) {
  const rel = path.relative(srcDir, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  const top = rel.split(path.sep)[0].replace(/\.js$/, '.ts');
  return layerOf.has(top) ? { index: layerOf.get(top), name: top } : undefined;
}

const layersPlugin = {
  rules: {
    'downward-only': {
      meta: { type: 'problem', schema: [], messages: { up: '{{from}} (layer {{fromLayer}}) must not import {{to}} (layer {{toLayer}}): layers import only downwards (LAYERS in eslint.config.js)' } },
      create(context) {
        const from = layerOfFile(context.filename);
        if (!from) return {};
        const check = (node, spec) => {
          if (typeof spec !== 'string' || !spec.startsWith('.')) return;
          const to = layerOfFile(path.resolve(path.dirname(context.filename), spec));
          if (to && to.index > from.index) {
            context.report({ node, messageId: 'up', data: { from: from.name, fromLayer: from.index, to: to.name, toLayer: to.index } });
          }
        };
        return {
          ImportDeclaration: (n) => check(n, n.source.value),
          ExportNamedDeclaration: (n) => n.source && check(n, n.source.value),
          ExportAllDeclaration: (n) => check(n, n.source.value),
          ImportExpression: (n) => check(n, n.source.value),
          TSImportType: (n) => check(n, (n.source ?? n.argument?.literal)?.value),
        };
      },
    },
  },
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'fixtures/generated/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URL: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { layers: layersPlugin },
    rules: { 'layers/downward-only': 'error' },
  },
  {
    // Only the safe-fs layer touches the disk; everything else goes through it.
    files: ['src/**/*.ts'],
    ignores: ['src/fs/**', 'src/testing/**'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: ['fs', 'node:fs', 'fs/promises', 'node:fs/promises', 'fs-extra'].map((name) => ({
          name,
          message: 'Disk access goes through src/fs (the safe-fs layer).',
        })),
      }],
    },
  },
  {
    // Only the CLI prints.
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: { 'no-console': 'error' },
  },
);
