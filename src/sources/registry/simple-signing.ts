import * as path from 'node:path';
import { StagedrootError } from '../../errors.js';
import { ScratchDir } from '../../fs/core/scratch-dir.js';
import { readSmallFile } from '../../fs/trees/fetch-file.js';
import { drain, readBody, send } from './http.js';
import { identityMatches, type Requirement } from './policy.js';
import { formatReference, type ImageReference } from './reference.js';
import { tlsFor } from './tls-files.js';

const MAX_SIGNATURE = 64 * 1024;
const MAX_SIGNATURES = 32;

/** Where a lookaside keeps the signatures of a manifest digest: `BASE/REPO@ALG=HEX/` (REPO the endpoint's repository). */
export function lookasideDir(base: string, ref: ImageReference, digest: string): string {
  const [alg, hex] = digest.split(':');
  return `${base.replace(/\/$/, '')}/${ref.repository}@${alg}=${hex}/`;
}

/**
 * The signatures of a manifest digest at a lookaside (`BASE/REPO@ALG=HEX/signature-N`, N
 * from 1 until one is missing). `ref` is the endpoint's reference (a mirror's own name
 * when a mirror served the image, as containers/image's lookasideStorageBaseURL of the
 * physical reference): REPO is its repository.
 */
export async function readLookaside(base: string, ref: ImageReference, digest: string): Promise<Buffer[]> {
  const dir = lookasideDir(base, ref, digest);
  const out: Buffer[] = [];
  for (let i = 1; i <= MAX_SIGNATURES; i++) {
    const url = new URL(`${dir}signature-${i}`);
    let sig: Buffer | null;
    if (url.protocol === 'file:') sig = await readSmallFile(decodeURIComponent(url.pathname), MAX_SIGNATURE);
    else if (url.protocol === 'https:' || url.protocol === 'http:') {
      const res = await send({ url, stallMs: 30_000, ...(url.protocol === 'https:' ? { tls: await tlsFor(url.host) } : {}) });
      if (res.statusCode === 404) {
        drain(res);
        sig = null;
      } else if (res.statusCode !== 200) {
        drain(res);
        throw new StagedrootError('SIGNATURE_INVALID', `${formatReference(ref)}: the lookaside ${url.origin} answered ${res.statusCode} for ${url.pathname}`, { path: url.href });
      } else sig = await readBody(res, MAX_SIGNATURE);
    } else throw new StagedrootError('SIGNATURE_INVALID', `${formatReference(ref)}: the lookaside ${base} is neither file://, http:// nor https://`, { path: base });
    if (sig === null) break;
    out.push(sig);
  }
  return out;
}

/**
 * Simple signing (containers-signature(5)): each signature an OpenPGP message of a JSON
 * claim, verified with gpg in a keyring of its own holding only the policy's keys; a
 * signature counts when gpg says VALIDSIG, its claim is an "atomic container signature"
 * of this manifest digest, and its identity matches the reference as the policy says.
 * Returns the signing key's fingerprint, or why none counted.
 */
export async function verifySignedBy(req: Extract<Requirement, { type: 'signedBy' }>, sigs: Buffer[], ref: ImageReference, digest: string): Promise<{ fingerprint: string } | { why: string }> {
  if (sigs.length === 0) return { why: 'it has no signature' };
  const { execa } = await import('execa');
  const h = new ScratchDir('stagedroot-gpg-');
  try {
    const keys = [...req.keyPaths];
    req.keyData.forEach((k, i) => keys.push(h.write(`key-${i}`, k)));
    for (const k of keys) {
      const r = await execa('gpg', ['--homedir', h.path, '--batch', '--no-tty', '--quiet', '--import', k], { reject: false, all: true });
      if (r.exitCode !== 0) throw new StagedrootError('SIGNATURE_INVALID', `The policy's key ${k} cannot be read by gpg: ${(r.all ?? '').trim().split('\n')[0]}`, { path: k });
    }
    const whys: string[] = [];
    for (const [i, s] of sigs.entries()) {
      const sig = h.write(`sig-${i}`, s);
      const out = path.join(h.path, `claim-${i}`);
      const r = await execa('gpg', ['--homedir', h.path, '--batch', '--no-tty', '--trust-model', 'always', '--status-fd', '1', '--output', out, '--decrypt', sig], { reject: false });
      const valid = /^\[GNUPG:\] VALIDSIG .* ([0-9A-F]{40})$/m.exec(r.stdout);
      if (r.exitCode !== 0 || valid === null) {
        whys.push(`signature ${i + 1} is not by a key the policy names (${/^\[GNUPG:\] (ERRSIG|BADSIG|EXPKEYSIG|REVKEYSIG|NO_PUBKEY)/m.exec(r.stdout)?.[1] ?? `gpg exit ${r.exitCode}`})`);
        continue;
      }
      const claim = await readSmallFile(out, MAX_SIGNATURE);
      let c: { critical?: { type?: unknown; image?: Record<string, unknown>; identity?: Record<string, unknown> } };
      try {
        c = JSON.parse(claim?.toString('utf8') ?? '');
      } catch {
        whys.push(`signature ${i + 1} signs no JSON claim`);
        continue;
      }
      const claimed = c.critical?.identity?.['docker-reference'];
      if (c.critical?.type !== 'atomic container signature') whys.push(`signature ${i + 1} is not an atomic container signature`);
      else if (c.critical.image?.['docker-manifest-digest'] !== digest) whys.push(`signature ${i + 1} signs ${String(c.critical.image?.['docker-manifest-digest'])}, not ${digest}`);
      else if (typeof claimed !== 'string' || !identityMatches(req.signedIdentity, ref, claimed)) whys.push(`signature ${i + 1} is for ${JSON.stringify(claimed)}, which ${req.signedIdentity.type} does not accept for ${formatReference(ref)}`);
      else return { fingerprint: valid[1]! };
    }
    return { why: whys.join('; ') };
  } finally {
    h.remove();
  }
}
