#!/usr/bin/env node
// The full stagedroot lifecycle on a temp-dir sysroot, narrated. Runs the real CLI.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, chmodSync, appendFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hashTree } from '../dist/testing/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'dist', 'cli', 'main.js');
const fixtures = join(here, '..', 'fixtures', 'demo');
const base = mkdtempSync(join(tmpdir(), 'stagedroot-demo-'));
const sysroot = join(base, 'sysroot');
const keep = process.argv.includes('--keep');

function say(text) {
  process.stdout.write(`\n\x1b[1m== ${text}\x1b[0m\n`);
}
function run(args, { expect = 0, quiet = false } = {}) {
  const r = spawnSync(process.execPath, [cli, ...args, '--sysroot', sysroot], { encoding: 'utf8' });
  if (quiet && r.status === expect) return r.stdout;
  process.stdout.write(`$ stagedroot ${args.join(' ')}\n`);
  process.stdout.write(r.stdout);
  if (r.stderr) process.stdout.write(r.stderr.trimEnd().replace(/^/gm, '  stderr| ') + '\n');
  if (r.status !== expect) {
    console.error(`demo: expected exit ${expect}, got ${r.status}`);
    process.exit(1);
  }
  process.stdout.write(`  (exit ${r.status})\n`);
  return r.stdout;
}

try {
  say('A base tree: usr/, etc/, and /home/core/test as a regular file (the MCD deadlock shape)');
  const tree = join(base, 'base-tree');
  for (const [p, c] of Object.entries({
    'usr/bin/app': '#!/bin/sh\necho app v1\n',
    'usr/lib/os-release': 'ID=demo\nVERSION_ID=1\n',
    'etc/os-release': 'ID=demo\nVERSION_ID=1\n',
    'etc/app/app.conf': 'listen = 80\n',
    'home/core/test': 'a regular file where an update wants a directory\n',
    'var/lib/app/data': 'row 1\n',
  })) {
    mkdirSync(dirname(join(tree, p)), { recursive: true });
    writeFileSync(join(tree, p), c);
  }
  chmodSync(join(tree, 'usr/bin/app'), 0o755);

  say('init: the first deployment is current, booted and good; var/ moves to the shared /var');
  run(['init', '--from', tree, '--label', 'base']);
  const status = () => JSON.parse(run(['status', '--json'], { quiet: true }));
  const sharedVar = status().shared.var;
  const show = (label, file) => process.stdout.write(`  ${label}: ${JSON.stringify(readFileSync(file, 'utf8'))}\n`);

  say('stage a good update: built from the booted tree (usr/ hardlinked, the rest reflinked), validated, made durable');
  run(['stage', join(fixtures, 'good-update.json')]);
  run(['status']);

  say('reboot: finalize at shutdown (one atomic symlink swap), then boot (tries counted)');
  run(['finalize']);
  run(['boot']);
  say('health checks passed: mark-good');
  run(['mark-good']);

  say('stage a broken update: /home/core/test/test while /home/core/test is a file');
  const booted = JSON.parse(run(['status', '--json'], { quiet: true })).deployments.find((d) => d.booted);
  const before = hashTree(booted.path);
  run(['stage', join(fixtures, 'broken-update.json')], { expect: 3 });
  const after = hashTree(booted.path);
  say(`the booted tree is byte-for-byte the same: ${before === after ? 'yes' : 'NO'} (sha256 ${after.slice(0, 16)}…)`);
  if (before !== after) process.exit(1);
  run(['status']);

  say('stage the corrected update: it supersedes the failed one, no manual step');
  run(['stage', join(fixtures, 'corrected-update.json')]);

  say('meanwhile the running system works: a local /etc edit and a /var write, made AFTER the stage');
  const live = status().deployments.find((d) => d.booted).path;
  writeFileSync(join(live, 'etc/app/app.conf'), 'listen = 8080\nworkers = 8   # tuned by hand\n');
  appendFileSync(join(sharedVar, 'lib/app/data'), 'row 2 (written after the stage)\n');
  show(`${live}/etc/app/app.conf`, join(live, 'etc/app/app.conf'));
  show(`${sharedVar}/lib/app/data`, join(sharedVar, 'lib/app/data'));

  say('reboot: finalize merges the local /etc edit into the new deployment; /var is shared, never copied');
  run(['finalize']);
  run(['boot']);
  run(['mark-good']);
  const cur = status().deployments.find((d) => d.booted).path;
  show('the new deployment\'s /etc/app/app.conf', join(cur, 'etc/app/app.conf'));
  show('/var/lib/app/data', join(sharedVar, 'lib/app/data'));
  if (!readFileSync(join(cur, 'etc/app/app.conf'), 'utf8').includes('tuned by hand') || !readFileSync(join(sharedVar, 'lib/app/data'), 'utf8').includes('row 2')) {
    console.error('demo: a local change was lost');
    process.exit(1);
  }
  run(['diff', '0002', '0004']);
  run(['verify']);

  say('rollback: the previous good deployment becomes current at the next boot; /var is left alone');
  appendFileSync(join(sharedVar, 'lib/app/data'), 'row 3 (written before the rollback)\n');
  const varBefore = readFileSync(join(sharedVar, 'lib/app/data'), 'utf8');
  run(['rollback']);
  run(['boot']);
  show('/var/lib/app/data after the rollback', join(sharedVar, 'lib/app/data'));
  if (readFileSync(join(sharedVar, 'lib/app/data'), 'utf8') !== varBefore) {
    console.error('demo: the rollback changed /var');
    process.exit(1);
  }

  say('status --json (what a node agent reads)');
  run(['status', '--json']);
  say(`done. ${keep ? `sysroot kept at ${sysroot}` : 'temp sysroot removed (pass --keep to keep it)'}`);
} finally {
  if (!keep) rmSync(base, { recursive: true, force: true });
}
