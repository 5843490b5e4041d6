import { describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { byDigest, formatReference, isRegistryReference, parseDockerReference, parsePullspec, registryEndpoint } from '../../../src/sources/registry/reference.js';

const D = `sha256:${'ab'.repeat(32)}`;

describe('docker:// references', () => {
  it('splits host, port, repository, tag', () => {
    expect(parseDockerReference('docker://127.0.0.1:5000/os/base:2.1')).toEqual({ input: 'docker://127.0.0.1:5000/os/base:2.1', registry: '127.0.0.1:5000', repository: 'os/base', tag: '2.1' });
    expect(parseDockerReference('docker://localhost/os')).toMatchObject({ registry: 'localhost', repository: 'os', tag: 'latest' });
    expect(parseDockerReference('docker://localhost:5000/os')).toMatchObject({ registry: 'localhost:5000', repository: 'os', tag: 'latest' });
  });

  it('splits a digest, and has no tag then', () => {
    const r = parseDockerReference(`docker://quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`);
    expect(r).toEqual({ input: `docker://quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`, registry: 'quay.io', repository: 'openshift-release-dev/ocp-v4.0-art-dev', digest: D });
    expect(formatReference(r)).toBe(`quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`);
  });

  it('defaults to docker.io (library/ for one component) and latest, as skopeo does', () => {
    expect(parseDockerReference('docker://busybox')).toMatchObject({ registry: 'docker.io', repository: 'library/busybox', tag: 'latest' });
    expect(parseDockerReference('docker://fedora/coreos:stable')).toMatchObject({ registry: 'docker.io', repository: 'fedora/coreos', tag: 'stable' });
    expect(parseDockerReference('docker://index.docker.io/busybox:1')).toMatchObject({ registry: 'docker.io', repository: 'library/busybox', tag: '1' });
    expect(parseDockerReference('docker://docker.io/library/busybox')).toMatchObject({ registry: 'docker.io', repository: 'library/busybox' });
    expect(registryEndpoint('docker.io')).toBe('registry-1.docker.io');
    expect(registryEndpoint('quay.io')).toBe('quay.io');
  });

  it('takes a first component with a dot, a port, localhost or capitals as the host', () => {
    expect(parseDockerReference('docker://my.registry/a').registry).toBe('my.registry');
    expect(parseDockerReference('docker://reg:443/a').registry).toBe('reg:443');
    expect(parseDockerReference('docker://Registry/a').registry).toBe('Registry');
    expect(parseDockerReference('docker://[::1]:5000/a').registry).toBe('[::1]:5000');
    // without a dot, port or capitals a first component is a docker.io namespace
    expect(parseDockerReference('docker://registry/a')).toMatchObject({ registry: 'docker.io', repository: 'registry/a' });
    // and a lone name is a repository even with a dot (distribution/reference reads it so)
    expect(parseDockerReference('docker://reg.io')).toMatchObject({ registry: 'docker.io', repository: 'library/reg.io' });
  });

  it('a tag resolved to a digest is the same image by digest', () => {
    const r = parseDockerReference('docker://localhost:5000/os:1');
    expect(formatReference(byDigest(r, D))).toBe(`localhost:5000/os@${D}`);
    expect(byDigest(r, D).tag).toBeUndefined();
  });

  it('is told apart from other sources', () => {
    expect(isRegistryReference('docker://x/y')).toBe(true);
    expect(isRegistryReference('oci:/x')).toBe(false);
    expect(isRegistryReference('/srv/docker://x')).toBe(false);
  });

  const bad: [string, RegExp][] = [
    ['docker:x/y', /does not start with docker:\/\/ \(the transport is written docker:\/\/ with two slashes\)/],
    ['oci:/srv/os', /does not start with docker:\/\//],
    ['docker://', /names no image/],
    ['docker://x/y:1@' + D, /both a tag and a digest/],
    ['docker://x/y@sha256:abc', /"sha256:abc" is not a digest/],
    ['docker://x/y@' + D.toUpperCase().replace('SHA256', 'sha256'), /is not a digest/],
    ['docker://x/y:-bad', /"-bad" is not a tag/],
    ['docker://x/y:' + 'a'.repeat(129), /is not a tag/],
    ['docker://reg.io/Os', /the repository name "Os" must be lowercase/],
    ['docker://reg.io//os', /empty path component/],
    ['docker://reg.io/os/', /empty path component/],
    ['docker://reg.io/os--x_', /"os--x_" is not a repository path component/],
    ['docker://reg.io:99999/os', /99999 is not a port/],
    ['docker://-reg.io/os', /"-reg.io" is not a registry host/],
    ['docker://reg.io/a b', /white space/],
    ['docker://https://reg.io/os', /a pullspec has no scheme \("https:\/\/"\)/],
    ['docker://reg.io/' + 'a'.repeat(250), /longer than 255/],
  ];
  it.each(bad)('refuses %s, naming it and why', (input, why) => {
    let err: unknown;
    try {
      parseDockerReference(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StagedrootError);
    const e = err as StagedrootError;
    expect(e.code).toBe('USAGE');
    expect(e.message).toContain(JSON.stringify(input));
    expect(e.message).toMatch(why);
    expect(e.value).toBe(input);
  });
});

describe('bare pullspecs (a MachineConfig osImageURL)', () => {
  it('reads what the MCO writes', () => {
    expect(parsePullspec(`quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`)).toEqual({ input: `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`, registry: 'quay.io', repository: 'openshift-release-dev/ocp-v4.0-art-dev', digest: D });
    expect(parsePullspec('image-registry.openshift-image-registry.svc:5000/openshift/os:4.16')).toMatchObject({ registry: 'image-registry.openshift-image-registry.svc:5000', repository: 'openshift/os', tag: '4.16' });
    expect(parsePullspec('busybox')).toMatchObject({ registry: 'docker.io', repository: 'library/busybox', tag: 'latest' });
  });

  it('refuses a docker:// prefix or any scheme in a pullspec, with the code the caller asks for', () => {
    expect(() => parsePullspec('docker://quay.io/a')).toThrow(/a pullspec has no scheme/);
    try {
      parsePullspec('quay.io/A/b', { code: 'SPEC_INVALID', what: 'spec.osImageURL' });
      expect.unreachable();
    } catch (e) {
      expect(e).toMatchObject({ code: 'SPEC_INVALID', path: 'spec.osImageURL' });
      expect((e as Error).message).toMatch(/^spec\.osImageURL "quay\.io\/A\/b" is not a valid image reference: the repository name "A\/b" must be lowercase$/);
    }
  });
});
