import { StagedrootError } from '../errors.js';

const DIGEST = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;

/**
 * Checks a digest's form (image-spec descriptor.md: the registered sha256/sha512). Here,
 * not in sources/, because the layer store's recovery runs on the boot path, which loads
 * nothing of the sources.
 */
export function checkDigest(d: unknown, what: string, where: string): string {
  if (typeof d !== 'string' || !DIGEST.test(d)) {
    throw new StagedrootError('SOURCE_UNSUPPORTED', `${where}: ${what} has the digest ${JSON.stringify(d)}, not a sha256 or sha512 digest`, { path: String(d) });
  }
  return d;
}
