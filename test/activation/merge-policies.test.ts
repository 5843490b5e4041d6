import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICIES } from '../../src/activation/default-policies.js';
import { mergePolicies } from '../../src/activation/merge-policies.js';
import { parsePolicyDocument } from '../../src/activation/policy-document.js';

describe('mergePolicies (the MCO MergeClusterPolicies)', () => {
  it('a user file policy on a default path replaces it in place; others are appended in order', () => {
    const m = mergePolicies({ files: [{ path: '/etc/my-file', actions: [{ type: 'None' }] }, { path: '/etc/containers/policy.json', actions: [{ type: 'Reboot' }] }], units: [], sshkey: { actions: [] } });
    expect(m.files.length).toBe(DEFAULT_POLICIES.files.length + 1);
    expect(m.files[2]).toEqual({ path: '/etc/containers/policy.json', actions: [{ type: 'Reboot' }] });
    expect(m.files.at(-1)).toEqual({ path: '/etc/my-file', actions: [{ type: 'None' }] });
    expect(m.sshkey).toEqual(DEFAULT_POLICIES.sshkey);
  });

  it('an SSH policy with actions replaces the default; units merge by name', () => {
    const m = mergePolicies({ files: [], units: [{ name: 'iri-registry.service', actions: [{ type: 'None' }] }, { name: 'a.service', actions: [{ type: 'Drain' }] }], sshkey: { actions: [{ type: 'Reboot' }] } });
    expect(m.sshkey.actions).toEqual([{ type: 'Reboot' }]);
    expect(m.units).toEqual([{ name: 'iri-registry.service', actions: [{ type: 'None' }] }, { name: 'a.service', actions: [{ type: 'Drain' }] }]);
  });
});

describe('parsePolicyDocument', () => {
  it('reads spec.nodeDisruptionPolicy of a MachineConfiguration in YAML, ignoring status', () => {
    const text = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster}
spec:
  logLevel: Normal
  nodeDisruptionPolicy:
    files:
    - path: /etc/my-file
      actions:
      - type: Restart
        restart: {serviceName: my.service}
    sshkey:
      actions: [{type: Drain}]
status:
  nodeDisruptionPolicyStatus: {clusterPolicies: {files: []}}
`;
    expect(parsePolicyDocument(text, 'p.yaml')).toEqual({ files: [{ path: '/etc/my-file', actions: [{ type: 'Restart', restart: { serviceName: 'my.service' } }] }], units: [], sshkey: { actions: [{ type: 'Drain' }] } });
  });

  it('names the bad field and the file', () => {
    const bad = JSON.stringify({ apiVersion: 'operator.openshift.io/v1', kind: 'MachineConfiguration', spec: { nodeDisruptionPolicy: { files: [{ path: 'etc/x', actions: [{ type: 'Restart' }] }] } } });
    expect(() => parsePolicyDocument(bad, 'p.json')).toThrow(/p\.json[\s\S]*spec\.nodeDisruptionPolicy\.files\[0\]\.path[\s\S]*absolute/);
    expect(() => parsePolicyDocument('{"kind":"MachineConfig","apiVersion":"v1"}', 'q.json')).toThrow(/expected kind MachineConfiguration/);
  });
});
