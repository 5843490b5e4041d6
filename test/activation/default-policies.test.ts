import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICIES } from '../../src/activation/default-policies.js';
import type { PolicyAction } from '../../src/activation/policy.js';

const dir = new URL('../../fixtures/mco/', import.meta.url);
const goSource = readFileSync(new URL('apihelpers-default-cluster-policies.go.txt', dir), 'utf8');
const constants = new Map(
  [...readFileSync(new URL('constants-policy-paths.go.txt', dir), 'utf8').matchAll(/^\s*(\w+)\s*=\s*"([^"]+)"/gm)].map((m) => [m[1], m[2]] as const),
);

/** A Go operand: a string literal or a constants.NAME. */
function value(s: string): string {
  const lit = /^"([^"]*)"$/.exec(s);
  if (lit) return lit[1]!;
  const c = /^constants\.(\w+)$/.exec(s);
  if (c && constants.has(c[1]!)) return constants.get(c[1]!)!;
  throw new Error(`unknown operand ${s}`);
}

/** The policies as the Go literal lists them, read token by token in source order. */
function parseGo(src: string) {
  const files: { path: string; actions: PolicyAction[] }[] = [];
  const units: { name: string; actions: PolicyAction[] }[] = [];
  const ssh: PolicyAction[] = [];
  let section: 'files' | 'units' | 'ssh' = 'files';
  let current: PolicyAction[] = [];
  let pendingType: string | null = null;
  for (const line of src.split('\n')) {
    if (/Units: \[\]/.test(line)) section = 'units';
    if (/SSHKey: /.test(line)) {
      section = 'ssh';
      current = ssh;
    }
    const p = /^\s*(Path|Name): (.+),$/.exec(line);
    if (p) {
      current = [];
      if (p[1] === 'Path') files.push({ path: value(p[2]!), actions: current });
      else units.push({ name: value(p[2]!), actions: current });
    }
    const t = /Type: opv1\.(\w+)StatusAction/.exec(line);
    if (t) {
      pendingType = t[1]!;
      if (!['Reload', 'Restart'].includes(t[1]!)) current.push({ type: t[1] } as PolicyAction);
    }
    const s = /ServiceName: (.+),$/.exec(line);
    if (s && pendingType === 'Reload') current.push({ type: 'Reload', reload: { serviceName: value(s[1]!) } });
    if (s && pendingType === 'Restart') current.push({ type: 'Restart', restart: { serviceName: value(s[1]!) } });
  }
  void section;
  return { files, units, sshkey: { actions: ssh } };
}

describe('the MCO default policies', () => {
  it('are the ones pkg/apihelpers lists at the recorded commit, in its order', () => {
    const fromGo = parseGo(goSource);
    expect(fromGo.files.length).toBe(13);
    expect(DEFAULT_POLICIES).toEqual(fromGo);
  });
});
