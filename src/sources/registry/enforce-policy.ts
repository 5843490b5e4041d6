import { pathToFileURL } from 'node:url';
import { StagedrootError } from '../../errors.js';
import type { RegistryClient } from './client.js';
import { requirementsFor, type Policy } from './policy.js';
import { formatReference, type ImageReference } from './reference.js';
import { builtinLookasideDir, REGISTRIES_D, registriesDFor, type RegistriesDConfig } from './registries-d.js';
import { readSigstoreAttachments, sigstoreKeyNames, sigstoreKeys, verifySigstoreSigned, type SigstoreAttachments } from './sigstore.js';
import { lookasideDir, readLookaside, verifySignedBy } from './simple-signing.js';

export interface PolicyVerdict {
  /** The scope of the policy that applied. */
  scope: string;
  /** The keys whose signatures were accepted: GPG fingerprints, and `the sigstore key NAME (sha256:…)` for sigstore keys. */
  signedBy: string[];
}

/**
 * The policy's verdict on an image before any layer is fetched: every requirement of the
 * reference's scope must hold (containers/image: all of them). Where the signatures are
 * is asked of registries.d about the endpoint that served the image (`client.ref`: a
 * mirror's own name when a mirror served it, as containers/image makes its client from
 * the physical reference), their claimed identity checked against `ref`, the name asked
 * for. `signedBy` reads them from that endpoint's lookaside, under its repository
 * (`BASE/REPO@sha256=HEX/signature-N`), or, when no registries.d scope names one, from
 * containers/image's built-in default (`builtinLookasideDir`; `defaultLookasideDir`
 * replaces it, for tests), as containers/image reads and skopeo writes them there;
 * `sigstoreSigned` from the sigstore attachment
 * in that registry, through `client`, when registries.d says
 * `use-sigstore-attachments: true` for it. A refusal is SIGNATURE_INVALID (a
 * rejection, exit 3) naming the image and what was expected.
 */
export async function enforcePolicy(policy: Policy, ref: ImageReference, digest: string, client: RegistryClient, o: { registriesD?: string; defaultLookasideDir?: string } = {}): Promise<PolicyVerdict> {
  const { scope, reqs } = requirementsFor(policy, ref);
  const image = formatReference(ref);
  const dir = o.registriesD ?? REGISTRIES_D;
  const refuse = (why: string): never => {
    throw new StagedrootError('SIGNATURE_INVALID', `${image} (${digest}) is refused by the policy ${policy.file} (${scope}): ${why}`, { path: image });
  };
  const signedBy: string[] = [];
  let sigs: Buffer[] | undefined;
  let where = '';
  let attachments: SigstoreAttachments | undefined;
  let config: RegistriesDConfig | undefined;
  const registriesD = async () => (config ??= await registriesDFor(client.ref, dir));
  for (const r of reqs) {
    if (r.type === 'insecureAcceptAnything') continue;
    if (r.type === 'reject') refuse('it rejects every image of this scope');
    if (r.type === 'sigstoreSigned') {
      if (r.unsupported.length > 0) {
        refuse(`it requires a sigstore signature checked with ${r.unsupported.join(', ')}, which stagedroot does not verify (keyless signing: a certificate from Fulcio or another CA); a requirement with keyPath, keyPaths, keyData or keyDatas (and a Rekor key) is verified`);
      }
      const logged = r.rekorKeyPaths.length + r.rekorKeyData.length > 0 ? ', logged in Rekor' : '';
      const expected = `it requires a sigstore signature by ${sigstoreKeyNames(r)}${logged} (${r.signedIdentity.type})`;
      if (attachments === undefined) {
        const use = (await registriesD()).useSigstoreAttachments;
        if (use?.value !== true) refuse(`${expected}, and ${use ? `${use.file} says use-sigstore-attachments: false` : `no file in ${dir} says use-sigstore-attachments: true`} for ${client.image}, so it has no sigstore signature to read`);
        attachments = await readSigstoreAttachments(client, digest);
      }
      const v = verifySigstoreSigned(r, await sigstoreKeys(r), attachments!, ref, digest);
      if ('why' in v) refuse(`${expected}, and ${v.why}`);
      else signedBy.push(`the sigstore key ${v.key.name} (${v.key.id})`);
      continue;
    }
    if (r.type !== 'signedBy') continue;
    if (sigs === undefined) {
      const at = (await registriesD()).lookaside;
      if (at === null) {
        // containers/image's built-in default: no registries.d scope names a lookaside for this endpoint.
        const base = o.defaultLookasideDir ?? builtinLookasideDir();
        where = ` (looked for in ${lookasideDir(base, client.ref, digest)}, the built-in default lookaside, as containers/image does: no file in ${dir} names a lookaside for ${client.image})`;
        sigs = await readLookaside(pathToFileURL(base).href, client.ref, digest);
      } else {
        where = ` (looked for in ${lookasideDir(at.url, client.ref, digest)}, the lookaside ${at.file} names for ${client.image})`;
        sigs = await readLookaside(at.url, client.ref, digest);
      }
    }
    const v = await verifySignedBy(r, sigs, ref, digest);
    if ('why' in v) refuse(`it requires a signature by ${r.keyPaths.join(', ') || 'the keyData key'} (${r.signedIdentity.type}), and ${v.why}${where}`);
    else signedBy.push(v.fingerprint);
  }
  return { scope, signedBy };
}
