import { describe, expect, it } from 'vitest';
import { decideActivation, type ChangeSummary } from '../../src/activation/decide.js';
import { DEFAULT_POLICIES } from '../../src/activation/default-policies.js';
import { mergePolicies } from '../../src/activation/merge-policies.js';
import type { DisruptionPolicy } from '../../src/activation/policy.js';

const change = (c: Partial<ChangeSummary>): ChangeSummary => ({ files: [], units: [], sshKey: false, forced: [], ...c });
const user = (p: Partial<DisruptionPolicy>): DisruptionPolicy => mergePolicies({ files: [], units: [], sshkey: { actions: [] }, ...p });
const defaults = DEFAULT_POLICIES;
const crio = { type: 'Reload', reload: { serviceName: 'crio.service' } } as const;

describe('decideActivation over the MCO defaults', () => {
  it('an SSH key or the pull secret alone: live, no action, no drain', () => {
    expect(decideActivation(change({ sshKey: true }), defaults)).toEqual({ mode: 'live', drain: false, actions: [{ type: 'None' }], reasons: [] });
    expect(decideActivation(change({ files: ['/var/lib/kubelet/config.json'] }), defaults).actions).toEqual([{ type: 'None' }]);
  });

  it('nothing changed: live with None', () => {
    expect(decideActivation(change({}), defaults)).toMatchObject({ mode: 'live', actions: [{ type: 'None' }] });
  });

  it('the CA bundle: both restarts, in the policy order; None beside them is stripped', () => {
    const d = decideActivation(change({ sshKey: true, files: ['/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt'] }), defaults);
    expect(d).toEqual({ mode: 'live', drain: false, reasons: [], actions: [{ type: 'Restart', restart: { serviceName: 'coreos-update-ca-trust.service' } }, { type: 'Restart', restart: { serviceName: 'crio.service' } }] });
  });

  it('keeps duplicate actions as the MCO does (one per changed path)', () => {
    const d = decideActivation(change({ files: ['/etc/containers/policy.json', '/etc/containers/registries.d/a.yaml', '/etc/containers/registries.d/b.yaml'] }), defaults);
    expect(d.actions).toEqual([crio, crio, crio]);
  });

  it('a file no policy covers forces a reboot, naming it (all of them, not only the first)', () => {
    const d = decideActivation(change({ files: ['/etc/containers/policy.json', '/etc/motd', '/etc/hosts'] }), defaults);
    expect(d).toEqual({ mode: 'reboot', drain: true, actions: [{ type: 'Reboot' }], reasons: [{ path: '/etc/motd', why: 'no disruption policy covers it' }, { path: '/etc/hosts', why: 'no disruption policy covers it' }] });
  });

  it('a unit with no policy forces a reboot; the default iri-registry.service policy is live', () => {
    expect(decideActivation(change({ units: ['foo.service'] }), defaults)).toMatchObject({ mode: 'reboot', reasons: [{ unit: 'foo.service' }] });
    expect(decideActivation(change({ units: ['iri-registry.service'] }), defaults).actions).toEqual([{ type: 'DaemonReload' }, { type: 'Restart', restart: { serviceName: 'iri-registry.service' } }]);
  });

  it('a kernel update names the first few of its thousands of paths and counts the rest', () => {
    const modules = Array.from({ length: 5000 }, (_, i) => ({ path: `/usr/lib/modules/6.1/m${i}.ko`, why: 'the kernel or initramfs changed' }));
    const forced = [...modules, { field: 'kernelArguments', why: 'the kernel arguments changed' }];
    const d = decideActivation(change({ forced }), defaults);
    expect(d.reasons).toEqual([...modules.slice(0, 5), forced[5000]]);
    expect(d.reasonsOmitted).toBe(4995);
    const few = decideActivation(change({ files: ['/etc/a', '/etc/b'] }), defaults);
    expect(few.reasons).toHaveLength(2);
    expect(few).not.toHaveProperty('reasonsOmitted');
  });

  it('the image, the kernel or its arguments force a reboot whatever the policies say', () => {
    const forced = [{ field: 'kernelArguments', why: 'the kernel arguments changed' }];
    expect(decideActivation(change({ forced, sshKey: true }), defaults)).toEqual({ mode: 'reboot', drain: true, actions: [{ type: 'Reboot' }], reasons: forced });
  });

  it('under /usr: a reboot unless a policy under /usr/local names it', () => {
    expect(decideActivation(change({ files: ['/usr/local/bin/load-registry-image.sh'] }), defaults)).toMatchObject({ mode: 'live', actions: [{ type: 'Restart', restart: { serviceName: 'iri-registry.service' } }] });
    const wide = user({ files: [{ path: '/usr', actions: [{ type: 'None' }] }] });
    expect(decideActivation(change({ files: ['/usr/bin/tool'] }), wide)).toMatchObject({ mode: 'reboot', reasons: [{ path: '/usr/bin/tool' }] });
    expect(decideActivation(change({ files: ['/usr/local/sbin/x'] }), wide)).toMatchObject({ mode: 'reboot' });
  });

  it('the longest matching policy path wins; a prefix must end at a path separator', () => {
    const p = user({ files: [{ path: '/etc/app', actions: [{ type: 'Reboot' }] }, { path: '/etc/app/conf.d', actions: [{ type: 'Restart', restart: { serviceName: 'app.service' } }] }] });
    expect(decideActivation(change({ files: ['/etc/app/conf.d/a.conf'] }), p).mode).toBe('live');
    expect(decideActivation(change({ files: ['/etc/app/other'] }), p)).toMatchObject({ mode: 'reboot', reasons: [{ path: '/etc/app/other', why: 'its policy (/etc/app) says Reboot' }] });
    expect(decideActivation(change({ files: ['/etc/application'] }), p)).toMatchObject({ mode: 'reboot', reasons: [{ why: 'no disruption policy covers it' }] });
  });

  it('a Drain action drains; Reload and Restart alone do not', () => {
    const p = user({ files: [{ path: '/etc/x', actions: [{ type: 'Drain' }, { type: 'Restart', restart: { serviceName: 'x.service' } }] }] });
    expect(decideActivation(change({ files: ['/etc/x'] }), p)).toMatchObject({ mode: 'live', drain: true });
    expect(decideActivation(change({ files: ['/etc/containers/policy.json'] }), defaults).drain).toBe(false);
  });
});

describe('registries.conf (Special)', () => {
  const before = `unqualified-search-registries = ["registry.access.redhat.com"]
[[registry]]
prefix = ""
location = "quay.io/openshift"
[[registry.mirror]]
location = "mirror.local/openshift"
pull-from-mirror = "digest-only"
`;
  const decide = (after: string | null) => decideActivation(change({ files: ['/etc/containers/registries.conf'], registriesConf: { before, after } }), defaults);

  it('adding a digest-only mirror or a search registry is live without a drain', () => {
    const more = before + `[[registry.mirror]]\nlocation = "mirror2.local/openshift"\npull-from-mirror = "digest-only"\n`;
    expect(decide(more)).toEqual({ mode: 'live', drain: false, actions: [{ type: 'Special' }], reasons: [] });
    expect(decide(before.replace('["registry.access.redhat.com"]', '["registry.access.redhat.com", "docker.io"]')).drain).toBe(false);
  });

  it('removing a mirror, a registry or a search entry drains, and says why', () => {
    const noMirror = `unqualified-search-registries = ["registry.access.redhat.com"]\n[[registry]]\nlocation = "quay.io/openshift"\n`;
    expect(decide(noMirror)).toEqual({ mode: 'live', drain: true, actions: [{ type: 'Special' }], reasons: [{ path: '/etc/containers/registries.conf', why: 'drain: mirror mirror.local/openshift of registry quay.io/openshift was removed' }] });
    expect(decide('unqualified-search-registries = ["registry.access.redhat.com"]\n').reasons[0]!.why).toMatch(/registry quay.io\/openshift was removed/);
    expect(decide(before.replace('["registry.access.redhat.com"]', '[]')).reasons[0]!.why).toMatch(/unqualified-search-registries entry was removed/);
  });

  it('a mirror added without digest-only, or one turned to tag-only, drains', () => {
    const tagged = before + `[[registry.mirror]]\nlocation = "m3.local/x"\npull-from-mirror = "all"\n`;
    expect(decide(tagged).drain).toBe(true);
    expect(decide(before.replace('"digest-only"', '"tag-only"')).drain).toBe(true);
    expect(decide(before + `[[registry]]\nlocation = "other.io"\n[[registry.mirror]]\nlocation = "m.local/o"\n`).drain).toBe(true);
    expect(decide(before + `[[registry]]\nlocation = "other.io"\n[[registry.mirror]]\nlocation = "m.local/o"\npull-from-mirror = "digest-only"\n`).drain).toBe(false);
  });

  it('a file that does not parse drains, naming the parse error', () => {
    expect(decide('[[registry]\n').reasons[0]!.why).toMatch(/does not parse as TOML/);
  });
});
