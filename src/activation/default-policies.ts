import type { DisruptionPolicy, PolicyAction } from './policy.js';

/**
 * The MCO's default cluster policies, as pkg/apihelpers/apihelpers.go (defaultClusterPolicies)
 * has them at openshift/machine-config-operator 7ff337a4ffac8e7562692181178ede61e4b2eec5,
 * paths from pkg/daemon/constants. fixtures/mco/ holds the same list as the MCO prints it
 * (test/activation checks that the two agree); user policies are merged over these.
 */
const reloadCrio: PolicyAction = { type: 'Reload', reload: { serviceName: 'crio.service' } };
const restart = (serviceName: string): PolicyAction => ({ type: 'Restart', restart: { serviceName } });

export const MCO_DEFAULTS_COMMIT = '7ff337a4ffac8e7562692181178ede61e4b2eec5';

export const DEFAULT_POLICIES: DisruptionPolicy = {
  files: [
    { path: '/var/lib/kubelet/config.json', actions: [{ type: 'None' }] },
    { path: '/etc/machine-config-daemon/no-reboot/containers-gpg.pub', actions: [reloadCrio] },
    { path: '/etc/containers/policy.json', actions: [reloadCrio] },
    { path: '/etc/containers/registries.conf', actions: [{ type: 'Special' }] },
    { path: '/etc/containers/registries.d', actions: [reloadCrio] },
    { path: '/etc/crio/policies', actions: [reloadCrio] },
    { path: '/etc/nmstate/openshift', actions: [{ type: 'None' }] },
    { path: '/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt', actions: [restart('coreos-update-ca-trust.service'), restart('crio.service')] },
    { path: '/etc/kubernetes/credential-providers', actions: [restart('kubelet.service')] },
    { path: '/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf', actions: [{ type: 'DaemonReload' }, restart('kubelet.service')] },
    { path: '/etc/iri-registry', actions: [restart('iri-registry.service')] },
    { path: '/usr/local/bin/load-registry-image.sh', actions: [restart('iri-registry.service')] },
    { path: '/etc/pki/ca-trust/source/anchors/iri-root-ca.crt', actions: [restart('coreos-update-ca-trust.service')] },
  ],
  units: [{ name: 'iri-registry.service', actions: [{ type: 'DaemonReload' }, restart('iri-registry.service')] }],
  sshkey: { actions: [{ type: 'None' }] },
};
