/**
 * PAX global headers (type 'g'), against the readers container tools use: GNU tar,
 * Go's archive/tar (containerd and umoci unpack layers with it; fixtures/tar-list) and
 * Python's tarfile. The readers disagree on what a global record does: GNU tar and Python
 * apply it to every later entry, Go to none. So stagedroot accepts a global header that
 * holds only a comment (git archive's), which lists the same in every reader, and refuses
 * any other (SOURCE_UNSUPPORTED): it never lists an archive as one reader does and
 * another does not (docs/sources.md).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LAYER_LIMITS } from '../../../src/sources/layer/entry-checks.js';
import { readTarEntries } from '../../../src/sources/tar/reader.js';
import { tarArchive } from '../../../fixtures/tar-writer.mjs';
import { tool } from '../../helpers/tools.js';

let dir: string;
let goLister: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-pax-global-'));
  goLister = path.join(dir, 'tar-list');
  const src = path.resolve(import.meta.dirname, '../../../fixtures/tar-list/main.go');
  await tool('go', ['build', '-o', goLister, src], { env: { GOCACHE: path.join(os.homedir(), '.cache', 'go-build'), GOFLAGS: '-mod=mod', CGO_ENABLED: '0' } });
}, 300_000);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** An entry as each reader lists it: type, name (a directory's trailing slash dropped), size, link target. */
type Listed = string;
const listed = (type: string, name: string, size: string | number, link: string): Listed => `${type}\t${name.replace(/\/$/, '')}\t${size}\t${link}`;

async function stagedroot(file: string): Promise<Listed[]> {
  const out: Listed[] = [];
  async function* bytes() {
    yield fs.readFileSync(file);
  }
  const code = { file: '0', symlink: '2', hardlink: '1', dir: '5' } as Record<string, string>;
  for await (const e of readTarEntries(bytes(), file, DEFAULT_LAYER_LIMITS)) {
    out.push(listed(code[e.kind] ?? e.kind, String(e.path), e.size, e.linkpath === undefined ? '' : String(e.linkpath)));
  }
  return out;
}

async function go(file: string): Promise<Listed[]> {
  return String((await tool(goLister, [file])).stdout).split('\n').filter(Boolean).map((l: string) => listed(...(l.split('\t') as [string, string, string, string])));
}

async function python(file: string): Promise<Listed[]> {
  const script = 'import sys, tarfile\nfor m in tarfile.open(sys.argv[1]):\n    print(f"{m.type.decode()}\\t{m.name}\\t{m.size}\\t{m.linkname}")';
  return String((await tool('python3', ['-c', script, file])).stdout).split('\n').filter(Boolean).map((l: string) => listed(...(l.split('\t') as [string, string, string, string])));
}

/** GNU tar's listing: names (`tar -t`) and, from `tar -tv`, sizes and link targets, in the same shape. */
async function gnu(file: string): Promise<Listed[]> {
  const r = await tool('tar', ['-tv', '--numeric-owner', '-f', file], { reject: false });
  return String(r.stdout).split('\n').filter(Boolean).map((l: string) => {
    const m = /^(.)\S+\s+\S+\s+(\d+)\s+\S+\s+\S+\s+(.*?)(?: -> (.*))?$/.exec(l)!;
    const type = m[1] === 'l' ? '2' : m[1] === 'd' ? '5' : m[1] === 'h' ? '1' : '0';
    return listed(type, m[3]!, m[2]!, m[4] ?? '');
  });
}

function write(name: string, entries: object[]): string {
  const file = path.join(dir, `${name}.tar`);
  fs.writeFileSync(file, tarArchive(entries));
  return file;
}

describe('PAX global headers', () => {
  it('a comment-only global header (git archive) is read, and lists the same as GNU tar, Go and Python', async () => {
    const repo = path.join(dir, 'repo');
    fs.mkdirSync(path.join(repo, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(repo, 'etc/app.conf'), 'a=1\n');
    fs.symlinkSync('app.conf', path.join(repo, 'etc/link'));
    const git = (...args: string[]) => tool('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.org', ...args]);
    await git('init', '-q');
    await git('add', '.');
    await git('commit', '-q', '-m', 'x');
    const file = path.join(dir, 'git.tar');
    await git('archive', '--format=tar', '-o', file, 'HEAD');
    expect(fs.readFileSync(file).toString('latin1', 0, 100)).toContain('pax_global_header');
    const written = write('comment', [{ name: 'etc/a', body: 'a\n', pax: [['comment', 'built by hand']], paxType: 'globalPax' }, { name: 'etc/b', body: 'bb\n' }]);
    for (const f of [file, written]) {
      const ours = await stagedroot(f);
      expect(ours.length).toBeGreaterThan(1);
      expect(await go(f)).toEqual(ours);
      expect(await python(f)).toEqual(ours);
      expect(await gnu(f)).toEqual(ours);
    }
  });

  const applied: [string, object[], string][] = [
    ['path', [{ name: 'etc/a', body: 'a\n', pax: [['path', 'etc/evil']], paxType: 'globalPax' }, { name: 'etc/b', body: 'b\n' }], 'path'],
    ['size', [{ name: 'etc/a', body: 'hello\n', pax: [['size', '0']], paxType: 'globalPax' }, { name: 'etc/b', body: 'b\n' }], 'size'],
    ['linkpath', [{ name: 'etc/l', type: 'symlink', linkname: 'target', pax: [['linkpath', '/etc/shadow']], paxType: 'globalPax' }, { name: 'etc/m', type: 'symlink', linkname: 't2' }], 'linkpath'],
    ['uid and mtime', [{ name: 'etc/a', body: 'a\n', pax: [['comment', 'c'], ['uid', '4242'], ['mtime', '1234567890']], paxType: 'globalPax' }], 'uid, mtime'],
  ];
  it.each(applied)('a global %s record, which the readers apply differently, is refused naming it', async (name, entries, named) => {
    const f = write(`global-${name}`, entries);
    // The differential stagedroot keeps out of its listing: GNU tar and Python apply the record, Go does not.
    const [g, p, t] = [await go(f), await python(f), await gnu(f)];
    if (name !== 'uid and mtime') {
      expect(p).not.toEqual(g);
      expect(t).not.toEqual(g);
    }
    const err = await stagedroot(f).then(() => null, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'SOURCE_UNSUPPORTED', message: expect.stringContaining(`its PAX global header`) });
    expect((err as Error).message).toContain(`sets ${named},`);
  });
});
