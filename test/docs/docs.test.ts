/**
 * Keeps README.md and docs/ honest where that is cheap: every error code and its exit code,
 * every CLI verb and option, every status field, working relative links, and no pointer
 * to files a user of the package does not have.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { StagedrootError, type ErrorCode } from '../../src/errors.js';
import { EXIT, exitCodeFor } from '../../src/exit-codes.js';
import { STAGE_PHASES, failureSchema, phaseSchema } from '../../src/state/schema.js';
import type { Status } from '../../src/state/status.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { requireDist } from '../helpers/crash.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (rel: string): string => fs.readFileSync(path.join(ROOT, rel), 'utf8');

/** The files under DIR whose names end in EXT, as paths relative to the repository. */
function filesUnder(dir: string, ext: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
      const p = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(ext)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** README.md and every Markdown file under docs/, as paths relative to the repository. */
const docFiles = (): string[] => ['README.md', ...filesUnder('docs', '.md')];

/** The codes of the ErrorCode union, read from the source (a type has no runtime list). */
function errorCodes(): string[] {
  const src = read('src/errors.ts');
  const union = /export type ErrorCode =([\s\S]*?);/.exec(src);
  expect(union, 'src/errors.ts declares `export type ErrorCode = ...;`').not.toBeNull();
  return [...union![1]!.matchAll(/\|\s*'([A-Z_]+)'/g)].map((m) => m[1]!);
}

/** `## ` sections of a Markdown file: heading line -> body. */
function sections(md: string): Array<{ heading: string; body: string }> {
  return md
    .split(/^(?=## )/m)
    .filter((s) => s.startsWith('## '))
    .map((s) => ({ heading: s.slice(0, s.indexOf('\n')), body: s }));
}

describe('docs/errors.md', () => {
  const doc = read('docs/errors.md');
  const rows = new Map([...doc.matchAll(/^\| `([A-Z_]+)` \| (\d) \|/gm)].map((m) => [m[1]!, Number(m[2])]));

  it('lists every error code of src/errors.ts, and no other', () => {
    const codes = errorCodes();
    expect(codes.length).toBeGreaterThan(10);
    expect([...rows.keys()].sort(), 'the table in docs/errors.md must match the ErrorCode union').toEqual([...codes].sort());
  });

  it('gives each code the exit code the CLI uses for it', () => {
    for (const [code, exit] of rows) {
      expect(exit, `exit code of ${code}`).toBe(exitCodeFor(new StagedrootError(code as ErrorCode, 'x')));
    }
  });

  it('describes every exit code', () => {
    const exits = [...doc.matchAll(/^\| (\d) \| /gm)].map((m) => Number(m[1]));
    expect(exits.sort()).toEqual(Object.values(EXIT).sort());
  });
});

// Every verb registered (the CLI itself registers only the verb it runs).
const fullProgram = await buildProgram({ io: { out: () => {}, err: () => {}, errIsTty: false, env: {} }, exitCode: 0 });

describe('docs/cli.md', () => {
  const doc = read('docs/cli.md');
  const secs = sections(doc);
  const program = fullProgram;
  const COMMON = ['--sysroot', '--wait', '--json'];
  const sectionOf = (verb: string) => secs.find((s) => new RegExp(`\`stagedroot ${verb}[\` ]`).test(s.heading));

  it('has a section for every verb of the program, with every option of that verb', () => {
    expect(program.commands.length).toBeGreaterThan(10);
    for (const cmd of program.commands) {
      const sec = sectionOf(cmd.name());
      expect(sec, `docs/cli.md needs a "## \`stagedroot ${cmd.name()}\`" section`).toBeDefined();
      for (const opt of cmd.options) {
        if (COMMON.includes(opt.long!)) continue;
        expect(sec!.body, `docs/cli.md, section of ${cmd.name()}: option ${opt.long}`).toContain(`\`${opt.long}`);
      }
    }
  });

  it('documents the options every verb takes, and every verb takes them', () => {
    const common = secs.find((s) => s.heading.includes('Options every verb takes'));
    expect(common).toBeDefined();
    for (const o of COMMON) expect(common!.body).toContain(`\`${o}`);
    for (const cmd of program.commands) {
      expect(cmd.options.map((o) => o.long), cmd.name()).toEqual(expect.arrayContaining(COMMON));
    }
  });

  it('documents no verb the program does not have', () => {
    const names = new Set(program.commands.map((c) => c.name()));
    const documented = secs.flatMap((s) => [...s.heading.matchAll(/`stagedroot ([a-z-]+)/g)].map((m) => m[1]!));
    expect(documented.length).toBeGreaterThan(10);
    expect(documented.filter((v) => !names.has(v))).toEqual([]);
  });
});

describe('docs/status-json.md', () => {
  const doc = read('docs/status-json.md');
  let t: TempSysroot;
  let status: Status;
  beforeAll(async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hi\n' }] });
    status = t.sysroot.status();
  });
  afterAll(() => t?.cleanup());

  it('names every field of a real status, of its deployments and of a failure', () => {
    const fields = [...Object.keys(status), ...Object.keys(status.deployments[0]!), 'source', ...Object.keys(failureSchema.shape)];
    for (const f of new Set(fields)) expect(doc, `docs/status-json.md: field ${f}`).toContain(`\`${f}\``);
  });

  it('names every phase a failure can have', () => {
    for (const p of phaseSchema.options) expect(doc, `docs/status-json.md: phase ${p}`).toContain(`\`${p}\``);
    for (const p of STAGE_PHASES) expect(doc, `docs/status-json.md: step ${p}`).toContain(`\`${p}\``);
  });

  it('shows the output of a real run (regenerate: npm run build && node scripts/docs-status-example.mjs --write)', async () => {
    requireDist();
    // @ts-expect-error: a plain .mjs script without types
    const { statusExamples, withExamples } = (await import('../../scripts/docs-status-example.mjs')) as {
      statusExamples: () => Record<string, string>;
      withExamples: (doc: string, ex: Record<string, string>) => string;
    };
    const real = statusExamples();
    const masked = (md: string): string => md.replace(/"(at|createdAt)": "[^"]*"/g, '"$1": "…"');
    expect(masked(doc), 'docs/status-json.md: an example differs from a real run').toBe(masked(withExamples(doc, real)));
  }, 120_000);
});

describe('README.md and docs/', () => {
  it('never send the reader to files a user of the package does not have (the shipped source and its comments included)', () => {
    for (const f of [...docFiles(), ...filesUnder('src', '.ts')]) {
      const text = read(f);
      for (const bad of ['../shared', 'shared/DESIGN', '/work/', 'DESIGN.md', 'ANCHORS.md', 'STYLE.md']) {
        expect(text.includes(bad), `${f} mentions ${bad}`).toBe(false);
      }
    }
  });

  it('have no broken relative links', () => {
    const broken: string[] = [];
    for (const f of docFiles()) {
      for (const m of read(f).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split('#')[0]!;
        if (target === '' || /^[a-z]+:/i.test(target)) continue;
        if (!fs.existsSync(path.resolve(path.dirname(path.join(ROOT, f)), target))) broken.push(`${f}: ${m[1]}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('name only source, test and unit files that exist', () => {
    const missing: string[] = [];
    for (const f of docFiles()) {
      for (const m of read(f).matchAll(/`((?:src|test|scripts|units)\/[^`\s*]+)`/g)) {
        if (!fs.existsSync(path.join(ROOT, m[1]!))) missing.push(`${f}: ${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('the README names every verb of the program, and no other', () => {
    const program = fullProgram;
    const verbs = /^Verbs: ([\s\S]*?)\. /m.exec(read('README.md'));
    expect(verbs, 'README.md has a "Verbs: `a`, `b`, ... ." sentence').not.toBeNull();
    const named = [...verbs![1]!.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!);
    expect(named.sort()).toEqual(program.commands.map((c) => c.name()).sort());
  });

  it('the README\'s test command is what CI runs, and it sets up the Debian tools first', () => {
    const first = /^```sh\n([\s\S]*?)```/m.exec(read('README.md'));
    expect(first, 'README.md opens with a sh block of its commands').not.toBeNull();
    const testLine = first![1]!.split('\n').find((l) => /^npm (run )?test\b/.test(l));
    expect(testLine, 'the README\'s first commands include its test command').toBeDefined();
    const command = testLine!.split('#')[0]!.trim();
    expect(command).toBe('npm test');
    expect(read('.ci/run')).toMatch(/^npm test( |$)/m);
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.test!.startsWith('bash scripts/test-setup.sh && ')).toBe(true);
  });

  it('the README stays short (under 200 lines) and links every section moved out of it', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThan(200);
    for (const f of ['docs/install.md', 'docs/trees.md', 'docs/sources.md', 'BENCHMARKS.md', 'CONTRIBUTING.md']) expect(readme, `README.md links ${f}`).toContain(`](${f})`);
  });

  it('the README lists the public methods of Sysroot, and no other', async () => {
    const { Sysroot } = await import('../../src/sysroot.js');
    const sentence = /`Sysroot` has ([\s\S]*?)\. /.exec(read('README.md'));
    expect(sentence, 'README.md has a "`Sysroot` has `a`, `b`, ... ." sentence').not.toBeNull();
    const named = [...sentence![1]!.matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]!).sort();
    const methods = Object.getOwnPropertyNames(Sysroot.prototype).filter((n) => n !== 'constructor');
    const statics = Object.getOwnPropertyNames(Sysroot).filter((n) => typeof (Sysroot as unknown as Record<string, unknown>)[n] === 'function');
    const source = read('src/sysroot.ts');
    const privateNames = new Set([...source.matchAll(/^ {2}private (?:async |readonly |static )*([A-Za-z]+)/gm)].map((m) => m[1]!));
    const props = [...source.matchAll(/^ {2}readonly ([A-Za-z]+):/gm)].map((m) => m[1]!);
    const actual = [...new Set([...methods, ...statics, ...props])].filter((n) => !privateNames.has(n)).sort();
    expect(named).toEqual(actual);
  });

  it('the CLI reports the version of package.json', async () => {
    const { cli } = await import('../helpers/cli.js');
    const r = await cli(['--version']);
    expect(r.out.trim()).toBe((JSON.parse(read('package.json')) as { version: string }).version);
  });

  it('link every page under docs/ from the README', () => {
    const readme = read('README.md');
    for (const f of docFiles().filter((x) => x !== 'README.md')) expect(readme, `README.md links ${f}`).toContain(`](${f})`);
  });
});
