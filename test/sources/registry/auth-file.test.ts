import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { AUTH_FILES, credentialsFor, findAuthFile, normalizeKey, readAuthFile } from '../../../src/sources/registry/auth-file.js';
import { parsePullspec } from '../../../src/sources/registry/reference.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-auth-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const b64 = (s: string) => Buffer.from(s).toString('base64');
const write = (name: string, doc: unknown) => {
  const p = path.join(dir, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return p;
};

describe('credentials files (docker config.json format)', () => {
  it('looks where the MCD and rpm-ostree look, stagedroot\'s own first, the kubelet pull secret last', () => {
    expect(AUTH_FILES).toEqual(['/run/stagedroot/auth.json', '/etc/stagedroot/auth.json', '/run/ostree/auth.json', '/etc/ostree/auth.json', '/var/lib/kubelet/config.json']);
  });

  it('takes the first that exists, and --authfile before all', async () => {
    const a = write('a/auth.json', { auths: { 'quay.io': { auth: b64('a:1') } } });
    const b = write('b/auth.json', { auths: { 'quay.io': { auth: b64('b:2') } } });
    const candidates = [path.join(dir, 'none.json'), b, a];
    expect((await findAuthFile({ candidates }))!.path).toBe(b);
    expect((await findAuthFile({ candidates, authfile: a }))!.path).toBe(a);
    expect(await findAuthFile({ candidates: [path.join(dir, 'none.json')] })).toBeNull();
    await expect(findAuthFile({ authfile: path.join(dir, 'missing.json') })).rejects.toMatchObject({ code: 'USAGE', option: 'authfile' });
  });

  it('finds the most specific entry: repository, namespace, registry; legacy URL keys count as their registry', async () => {
    const f = await readAuthFile(
      write('keys.json', {
        auths: {
          'quay.io': { auth: b64('reg:r') },
          'quay.io/org': { auth: b64('ns:n') },
          'quay.io/org/os': { auth: b64('repo:p') },
          'https://index.docker.io/v1/': { auth: b64('hub:h') },
          'registry.example:5000': { username: 'u', password: 'p:w' },
        },
      }),
    );
    expect(credentialsFor(f, parsePullspec('quay.io/org/os:1'))).toEqual({ username: 'repo', password: 'p' });
    expect(credentialsFor(f, parsePullspec('quay.io/org/other:1'))).toEqual({ username: 'ns', password: 'n' });
    expect(credentialsFor(f, parsePullspec('quay.io/x/y'))).toEqual({ username: 'reg', password: 'r' });
    expect(credentialsFor(f, parsePullspec('busybox'))).toEqual({ username: 'hub', password: 'h' });
    expect(credentialsFor(f, parsePullspec('registry.example:5000/os'))).toEqual({ username: 'u', password: 'p:w' });
    expect(credentialsFor(f, parsePullspec('ghcr.io/a/b'))).toBeNull();
    expect(normalizeKey('http://registry-1.docker.io/v2/')).toBe('docker.io');
  });

  it('a malformed file is refused naming the file, never quoting its content', async () => {
    const cases: [unknown, RegExp][] = [
      ['{"auths": {"quay.io": {"auth": "c2VjcmV0LXRleHQ"', /is not valid JSON$/],
      [[1], /is not a JSON object$/],
      [{ auths: [] }, /"auths" is not an object$/],
      [{ auths: { 'quay.io': { auth: b64('no-colon-secret') } } }, /the "auth" of "quay.io" is not base64 of USER:PASSWORD$/],
    ];
    for (const [doc, why] of cases) {
      const p = write('bad.json', doc);
      const err = (await readAuthFile(p).catch((e: unknown) => e)) as StagedrootError;
      expect(err.code).toBe('REGISTRY_FAILED');
      expect(err.message).toMatch(new RegExp(`^The credentials file ${p} is not in docker config.json format: `));
      expect(err.message).toMatch(why);
      expect(err.message).not.toMatch(/secret|c2Vj/);
    }
  });
});
