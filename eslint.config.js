import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layers of src/, lowest first. A module imports only from its own layer or a lower
 * one, never upwards (rule `layers/downward-only` below), and no module reaches itself
 * again through its imports (a circle, even inside one layer). Every entry of src/ must be
 * listed: a new folder or top-level file gets its place here, or lint fails. A folder split
 * into layers (`fs/core`, ...) lists each of its entries.
 */
const LAYERS = [
  ['errors.ts', 'exit-codes.ts', 'util'], // typed errors and small helpers
  ['state'], // the pure model: schema, transitions, status view, layout (no disk, no context)
  // The safe-fs layer, the only code that touches the disk, in four rows:
  ['fs/core'], // the syscall core: byte names, paths, xattrs, an entry's attributes, hashing, fsync/syncfs, directory walks, reads of host paths, I/O errors
  ['fs/jobs'], // tree-sized work on worker threads: the task registry, the runner, the worker, errors over the wire
  ['fs/manifests'], // a tree's manifest: format, cursor, index, sizes, snapshot, patch, diff, verify, delta
  ['fs/trees', 'fs/lock', 'fs/output'], // trees: the chroot-style RootFs, the read-only tree, copies, removal, storage, SELinux labels; the sysroot's own durable files; the sysroot's writer lock; a command's output captured in a file
  ['trust', 'hooks'], // signatures and trusted keys (minisign/signify); phase hooks
  ['systemd'], // systemd units in an offline tree (names, directories, [Install]), for sources and validators; systemd's manager over its private D-Bus socket (bus/), for apply-live's actions
  ['changeset.ts', 'apply-changes.ts', 'sources', 'validate', 'activation/closest-policy.ts', 'activation/decide.ts', 'activation/default-policies.ts', 'activation/merge-policies.ts', 'activation/policy-document.ts', 'activation/policy.ts', 'activation/registries-conf-safety.ts'], // what an update is and how it is applied to a tree through RootFs (apply-changes.ts; sources/: every kind, sources/registry/'s pulls from a registry among them), how a tree is judged, and what its activation costs the node (live or reboot)
  ['activation/live'], // a live apply's parts: the intent journal, the entries written into the running root and undone, the systemctl actions, crash recovery
  // A sysroot on disk, in four rows so that no arrow runs back up from the store to what it stores:
  ['context.ts', 'fleetlock'], // the context every operation on a sysroot takes (layout, durable writes, faults, storage); FleetLock settings and client
  ['boot/entries'], // the bootloader's entries and the record that lets a sync skip work
  ['store', 'layer-store'], // the state file, the transition writer (which syncs the entries), recovery (which runs the resume steps it is given), removal; the layer store (image layers unpacked once, trees linked from it)
  ['merge', 'persistent-dirs/apply.ts', 'persistent-dirs/changed-shared.ts', 'persistent-dirs/config.ts', 'persistent-dirs/mount-points.ts', 'persistent-dirs/ops.ts', 'persistent-dirs/package-db.ts', 'persistent-dirs/upgrade.ts'], // the /etc merge; the shared directories (/var: their list, the package databases each deployment keeps under usr/ (linked from the shared /var), the ops a stage records, applying them at finalize, what they change for the activation decision, the layout upgrade)
  ['stage', 'persistent-dirs/divert.ts', 'persistent-dirs/run-content.ts', 'commit', 'boot/boot.ts', 'boot/boot-record.ts', 'boot/find-sysroot.ts', 'boot/health.ts', 'rollback', 'install/install.ts', 'install/mount-table.ts', 'install/package-files.ts', 'install/unit-text.ts'], // the operations, one per lifecycle step (src/stage, src/commit and src/rollback are the folders users were promised); installing on a host and what adopting a root plans; what a stage writes under a shared directory (diverted, or kept from a command's run)
  ['operations'], // the operation table: each operation's hooks and plan, its resume step, and the one way every writer runs (lock, resume, plan, hooks, apply)
  ['sysroot.ts'], // the handle: the operations behind one API
  ['assess-health.ts', 'install/adopt.ts', 'agent', 'testing', 'cli', 'index.ts'], // works on a whole sysroot (a boot's assessment; adopting a running root, through the operations' runner); entry points
];

const here = path.dirname(fileURLToPath(import.meta.url));
const srcDir = path.join(here, 'src');
const layerOf = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i])));
const splitDirs = new Set([...layerOf.keys()].filter((n) => n.includes('/')).map((n) => n.split('/')[0]));
const unlisted = fs.readdirSync(srcDir).flatMap((n) => (splitDirs.has(n) ? fs.readdirSync(path.join(srcDir, n)).map((m) => `${n}/${m}`) : [n])).filter((n) => !layerOf.has(n));
if (unlisted.length > 0) {
  throw new Error(`eslint.config.js: src/${unlisted.join(', src/')} has no place in LAYERS; add it to the layer it belongs to`);
}

/** The layer of a file under src/ (by its first path component, or first two in a split folder); undefined outside src/ or in no layer. */
function layerOfFile(file) {
  const rel = path.relative(srcDir, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  const parts = rel.split(path.sep).map((p) => p.replace(/\.js$/, '.ts'));
  const name = splitDirs.has(parts[0]) && parts.length > 1 ? `${parts[0]}/${parts[1]}` : parts[0];
  return layerOf.has(name) ? { index: layerOf.get(name), name } : undefined;
}

/** The module a relative specifier names, as the .ts file under src/ (undefined for a package or outside src/). */
function resolveSpec(from, spec) {
  if (typeof spec !== 'string' || !spec.startsWith('.')) return undefined;
  const file = path.resolve(path.dirname(from), spec).replace(/\.js$/, '.ts');
  return file.startsWith(srcDir + path.sep) ? file : undefined;
}

/** The specifier of every import and re-export in an ESTree program (types and import() included). */
function specifiersOf(node, out = []) {
  if (node === null || typeof node !== 'object') return out;
  if (Array.isArray(node)) {
    for (const n of node) specifiersOf(n, out);
    return out;
  }
  if ((node.type === 'ImportDeclaration' || node.type === 'ExportAllDeclaration' || node.type === 'ImportExpression' || node.type === 'ExportNamedDeclaration') && node.source?.value !== undefined) out.push(node.source.value);
  if (node.type === 'TSImportType') out.push((node.source ?? node.argument?.literal)?.value);
  for (const [k, v] of Object.entries(node)) if (k !== 'parent' && k !== 'loc' && k !== 'range' && typeof v === 'object') specifiersOf(v, out);
  return out;
}

/** The modules each file of src/ imports, read from disk once per lint run (the circle check follows them). */
let diskGraph;
function importsOnDisk() {
  if (diskGraph !== undefined) return diskGraph;
  diskGraph = new Map();
  for (const rel of fs.readdirSync(srcDir, { recursive: true })) {
    if (!rel.endsWith('.ts')) continue;
    const file = path.join(srcDir, rel);
    const { ast } = tseslint.parser.parseForESLint(fs.readFileSync(file, 'utf8'), { sourceType: 'module', ecmaVersion: 'latest', range: false, loc: false });
    diskGraph.set(file, [...new Set(specifiersOf(ast.body).map((s) => resolveSpec(file, s)).filter(Boolean))]);
  }
  return diskGraph;
}

/** A path of imports from `start` back to `file` (the file's own imports as linted), or null. */
function circleThrough(file, ownImports, start) {
  const graph = importsOnDisk();
  const seen = new Set();
  const walk = (node, trail) => {
    if (node === file) return trail;
    if (seen.has(node)) return null;
    seen.add(node);
    for (const next of graph.get(node) ?? []) {
      const found = walk(next, [...trail, next]);
      if (found) return found;
    }
    return null;
  };
  return ownImports.has(start) ? walk(start, [start]) : null;
}

const layersPlugin = {
  rules: {
    'downward-only': {
      meta: {
        type: 'problem',
        schema: [],
        messages: {
          up: '{{from}} (layer {{fromLayer}}) must not import {{to}} (layer {{toLayer}}): layers import only downwards (LAYERS in eslint.config.js)',
          circle: 'import circle: {{chain}} (break it: move what both need one layer down, or into the importing module)',
          unlisted: 'src/{{name}} is in no layer: give it its place in LAYERS (eslint.config.js)',
        },
      },
      create(context) {
        const from = layerOfFile(context.filename);
        const rel = path.relative(srcDir, context.filename);
        if (!from) {
          if (!rel.startsWith('..') && !path.isAbsolute(rel)) context.report({ loc: { line: 1, column: 0 }, messageId: 'unlisted', data: { name: rel } });
          return {};
        }
        const imports = [];
        const check = (node, spec) => {
          const target = resolveSpec(context.filename, spec);
          if (target === undefined) return;
          imports.push({ node, target });
          const to = layerOfFile(target);
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
          'Program:exit': () => {
            const own = new Set(imports.map((i) => i.target));
            const reported = new Set();
            for (const { node, target } of imports) {
              if (reported.has(target)) continue;
              reported.add(target);
              const trail = circleThrough(context.filename, own, target);
              if (trail) context.report({ node, messageId: 'circle', data: { chain: [context.filename, ...trail].map((f) => path.relative(srcDir, f)).join(' → ') } });
            }
          },
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
