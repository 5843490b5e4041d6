/**
 * containers-policy.json read as strictly as containers/image reads it (policy_config.go,
 * policy_config_sigstore.go): a field a requirement or a signedIdentity does not define,
 * two key sources, a repeated key are policy errors (SIGNATURE_INVALID naming the file,
 * the requirement and the field), never ignored; and the strict JSON scan that finds a
 * repeated key.
 */
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../../src/sources/registry/policy.js';
import { duplicateKey } from '../../../src/sources/registry/strict-json.js';

const policy = (reqs: unknown[]): string => JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: { 'example.com/os': reqs } } });
const where = 'p.json: transports.docker["example.com/os"][0]';
const signedBy = (more: Record<string, unknown> = {}) => ({ type: 'signedBy', keyType: 'GPGKeys', keyPath: '/k.asc', ...more });
const refusal = (text: string): { code?: string; message: string } => {
  try {
    parsePolicy(text, 'p.json');
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('the policy was accepted');
};

describe('policy requirements: only the fields containers/image defines', () => {
  it('signedBy: type, keyType, keyPath, keyPaths, keyData, signedIdentity; anything else is refused, named', () => {
    expect(parsePolicy(policy([signedBy({ signedIdentity: { type: 'matchRepository' } })]), 'p.json').docker.get('example.com/os')).toEqual([
      { type: 'signedBy', keyPaths: ['/k.asc'], keyData: [], signedIdentity: { type: 'matchRepository' } },
    ]);
    // a misspelt signedIdentity would otherwise fall back to matchRepoDigestOrExact without a word
    expect(refusal(policy([signedBy({ signedIdentiy: { type: 'matchRepository' } })]))).toMatchObject({ code: 'SIGNATURE_INVALID', message: `${where}: signedBy has unknown field signedIdentiy` });
    expect(refusal(policy([signedBy({ rekorPublicKeyPath: '/r', keyDatas: ['eA=='] })])).message).toBe(`${where}: signedBy has unknown fields rekorPublicKeyPath, keyDatas`);
  });

  it('signedBy takes exactly one of keyPath, keyPaths, keyData (containers/image: more than one is an error, not the first one winning)', () => {
    expect(refusal(policy([signedBy({ keyPaths: ['/a.asc'] })])).message).toBe(`${where}: signedBy has keyPath and keyPaths: it takes exactly one of keyPath, keyPaths, keyData`);
    expect(refusal(policy([signedBy({ keyData: 'eA==' })])).message).toBe(`${where}: signedBy has keyPath and keyData: it takes exactly one of keyPath, keyPaths, keyData`);
    expect(refusal(policy([{ type: 'signedBy', keyType: 'GPGKeys' }])).message).toBe(`${where}: signedBy needs one of keyPath, keyPaths, keyData`);
    expect(refusal(policy([{ type: 'signedBy', keyType: 'GPGKeys', keyPaths: [] }])).message).toBe(`${where}: keyPaths is not a non-empty array of strings`);
    expect(refusal(policy([{ type: 'signedBy', keyType: 'GPGKeys', keyPath: 1 }])).message).toBe(`${where}: keyPath is not a string`);
    const p = parsePolicy(policy([{ type: 'signedBy', keyType: 'GPGKeys', keyPaths: ['/a', '/b'] }, { type: 'signedBy', keyType: 'GPGKeys', keyData: Buffer.from('KEY').toString('base64') }]), 'p.json');
    expect(p.docker.get('example.com/os')).toMatchObject([{ keyPaths: ['/a', '/b'], keyData: [] }, { keyPaths: [], keyData: [Buffer.from('KEY')] }]);
  });

  it('insecureAcceptAnything and reject: type alone', () => {
    expect(refusal(policy([{ type: 'reject', keyPath: '/k.asc' }])).message).toBe(`${where}: reject has unknown field keyPath`);
    expect(refusal(JSON.stringify({ default: [{ type: 'insecureAcceptAnything', scope: 'x' }] })).message).toBe('p.json: default[0]: insecureAcceptAnything has unknown field scope');
  });

  it('signedIdentity: type and, for exactReference and exactRepository, their reference; also inside sigstoreSigned', () => {
    expect(refusal(policy([signedBy({ signedIdentity: { type: 'matchExact', dockerReference: 'example.com/os:1' } })])).message).toBe(`${where}: signedIdentity matchExact has unknown field dockerReference`);
    expect(refusal(policy([signedBy({ signedIdentity: { type: 'exactRepository', dockerRepository: 'example.com/os', dockerReference: 'example.com/os:1' } })])).message).toBe(`${where}: signedIdentity exactRepository has unknown field dockerReference`);
    expect(refusal(policy([signedBy({ signedIdentity: { type: 'exactReference', dockerRepository: 'example.com/os' } })])).message).toBe(`${where}: signedIdentity exactReference has unknown field dockerRepository`);
    expect(refusal(policy([{ type: 'sigstoreSigned', keyPath: '/k.pub', signedIdentity: { type: 'matchRepository', prefix: 'x' } }])).message).toBe(`${where}: signedIdentity matchRepository has unknown field prefix`);
    expect(refusal(policy([signedBy({ signedIdentity: null })])).message).toBe(`${where}: signedIdentity is not an object`);
    expect(parsePolicy(policy([signedBy({ signedIdentity: { type: 'exactReference', dockerReference: 'example.com/os:1' } })]), 'p.json').docker.get('example.com/os')).toMatchObject([{ signedIdentity: { type: 'exactReference', dockerReference: 'example.com/os:1' } }]);
  });

  it('a key repeated anywhere, or a top-level field other than default and transports, is refused', () => {
    const twice = `{"default": [{"type": "reject"}], "transports": {"docker": {"example.com/os": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k.asc", "keyPath": "/other.asc"}]}}}`;
    expect(refusal(twice)).toMatchObject({ code: 'SIGNATURE_INVALID', message: 'p.json: it has the key "keyPath" twice in transports.docker.example.com/os.[]' });
    expect(refusal('{"default": [{"type": "reject"}], "default": [{"type": "insecureAcceptAnything"}]}').message).toBe('p.json: it has the key "default" twice');
    expect(refusal(JSON.stringify({ default: [{ type: 'reject' }], transport: { docker: {} } })).message).toBe('p.json: a policy has default and transports, not transport');
    expect(refusal(JSON.stringify({ default: [{ type: 'reject' }], transports: [] })).message).toBe('p.json: transports must be an object of transport names to scopes');
    expect(refusal(JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: [{ type: 'reject' }] } })).message).toBe('p.json: transports.docker must be an object of scopes to requirements');
    // Debian's own policy.json: another transport's scopes are kept aside, its requirements not read.
    expect(parsePolicy(JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: { 'docker-daemon': { '': [{ type: 'insecureAcceptAnything' }] } } }), 'p.json').docker.size).toBe(0);
  });
});

describe('duplicateKey (the strict JSON scan)', () => {
  it('finds a repeated key at any depth, keys compared decoded; strings and values are not keys', () => {
    expect(duplicateKey('{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}}')).toEqual({ path: ['b', 'c', '[]'], key: 'd' });
    expect(duplicateKey('{"a": 1, "\\u0061": 2}')).toEqual({ path: [], key: 'a' });
    expect(duplicateKey('{"a": "a", "b": ["a", "a"], "c": {"a": 1}, "d": {"a": 1}}')).toBeNull();
    expect(duplicateKey('{"a\\"": {"x": "\\\\", "y" : 1}, "b" \n : {"x": 1, "x" : 2}}')).toEqual({ path: ['b'], key: 'x' });
    expect(duplicateKey('[{"a": 1}, {"a": 1}]')).toBeNull();
    expect(duplicateKey('"x"')).toBeNull();
    expect(duplicateKey('{"o": {"k": 1, "k": 2}}', (p) => p[0] !== 'o')).toBeNull();
  });
});
