#!/usr/bin/env node
// The `status --json` examples of docs/status-json.md, from a real run of the CLI (dist/).
//   node scripts/docs-status-example.mjs           prints them
//   node scripts/docs-status-example.mjs --write   rewrites the blocks after the
//                                                  <!-- generated: NAME --> markers in the doc
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const CLI = join(here, '..', 'dist', 'cli', 'main.js');
export const DOC = join(here, '..', 'docs', 'status-json.md');

/** Runs the sequence the doc shows; returns the examples by marker name, the temp dir shown as /tmp/example. */
export function statusExamples() {
  const base = mkdtempSync(join(tmpdir(), 'stagedroot-docs-'));
  const sysroot = join(base, 'sysroot');
  const run = (args, expect = 0) => {
    const r = spawnSync(process.execPath, [CLI, ...args, '--sysroot', sysroot], { encoding: 'utf8' });
    if (r.status !== expect) throw new Error(`stagedroot ${args.join(' ')}: exit ${r.status}, expected ${expect}\n${r.stderr}`);
    return r.stdout;
  };
  const show = (json) => JSON.stringify(JSON.parse(json.split(base).join('/tmp/example')), null, 2);
  try {
    mkdirSync(join(base, 'tree/etc'), { recursive: true });
    mkdirSync(join(base, 'tree/usr/bin'), { recursive: true });
    writeFileSync(join(base, 'tree/etc/os-release'), 'ID=example\n');
    writeFileSync(join(base, 'tree/usr/bin/app'), 'app\n');
    const spec = (label, path, contents) => {
      writeFileSync(join(base, `${label}.json`), JSON.stringify({ label, files: [{ path, contents }] }));
      return join(base, `${label}.json`);
    };
    run(['init', '--from', join(base, 'tree'), '--label', 'base']);
    run(['stage', spec('web-2', '/etc/motd', 'hello\n')]);
    run(['finalize']);
    run(['boot']);
    run(['mark-good']);
    run(['stage', spec('web-3', '/etc/motd', 'hello again\n')]);
    run(['stage', spec('web-4', '/etc/os-release/x', 'x')], 3);
    const full = show(run(['status', '--json']));
    run(['finalize']);
    const after = JSON.parse(run(['status', '--json']));
    const pending = JSON.stringify(Object.fromEntries(['booted', 'current', 'staged', 'rollback', 'pendingReboot'].map((k) => [k, after[k]])), null, 2);
    return { 'status-full': full, 'status-pending': pending };
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

/** The doc with each block after a `<!-- generated: NAME -->` marker replaced. */
export function withExamples(doc, examples) {
  let out = doc;
  for (const [name, json] of Object.entries(examples)) {
    const re = new RegExp(`(<!-- generated: ${name} -->\\n\`\`\`json\\n)[\\s\\S]*?(\\n\`\`\`)`);
    if (!re.test(out)) throw new Error(`${DOC}: no block after <!-- generated: ${name} -->`);
    out = out.replace(re, (_m, a, b) => a + json + b);
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const examples = statusExamples();
  if (process.argv.includes('--write')) writeFileSync(DOC, withExamples(readFileSync(DOC, 'utf8'), examples));
  else for (const [name, json] of Object.entries(examples)) process.stdout.write(`${name}:\n${json}\n`);
}
