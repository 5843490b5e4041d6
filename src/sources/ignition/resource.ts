import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import type { IssueList } from './issues.js';
import { decodeDataUrl, DataUrlError } from './data-url.js';

export interface Resource {
  source?: string;
  compression?: string;
  verification?: { hash?: string };
}

/**
 * Decoded bytes are held in memory until applied (they are checked whole before anything
 * is written), so they have a budget: a gzip bomb in a config is an unsafe entry, not an
 * out-of-memory crash.
 */
export class DecodeBudget {
  constructor(public remaining: number) {}
}

/**
 * A resource's bytes: data URL decoded, gunzipped when `compression` is "gzip", then
 * checked against `verification.hash`. The Ignition v3 specification (3.0.0 through
 * 3.6.0, storage.files[].contents.verification.hash) says: "If `compression` is
 * specified, the hash describes the decompressed contents" — so the hash is computed
 * over the decompressed bytes, as Ignition itself does. Problems are added to `issues`
 * under `at` (e.g. "storage.files[1].contents") and null is returned. No source at all is
 * null (nothing to write); an empty source is zero bytes.
 */
export function decodeResource(r: Resource, at: string, treePath: string, budget: DecodeBudget, issues: IssueList): Buffer | null {
  if (r.source === undefined) return null;
  // An empty source is empty contents: Ignition fetches nothing for it (no decompression,
  // no hash to check) and writes an empty file, the way to empty a file or replace a link.
  if (r.source === '') return Buffer.alloc(0);
  if (!/^data:/i.test(r.source)) {
    issues.add('SPEC_INVALID', `${at}.source`, `not a URL: ${JSON.stringify(r.source.slice(0, 40))} (only data: URLs are applied)`);
    return null;
  }
  let data: Buffer;
  try {
    data = decodeDataUrl(r.source);
  } catch (err) {
    if (!(err instanceof DataUrlError)) throw err;
    issues.add('SOURCE_CORRUPT', `${at}.source`, `malformed data: URL for ${treePath}: ${err.message}`);
    return null;
  }
  if (r.compression === 'gzip') {
    try {
      data = gunzipSync(data, { maxOutputLength: Math.max(1, budget.remaining) });
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) {
        issues.add('UNSAFE_ENTRY', `${at}.source`, `gzip contents for ${treePath} decompress to more than the ${budget.remaining} bytes left in the decode budget (a gzip bomb?)`);
      } else {
        issues.add('SOURCE_CORRUPT', `${at}.source`, `gzip contents for ${treePath} are corrupt: ${(err as Error).message}`);
      }
      return null;
    }
  }
  if (data.length > budget.remaining) {
    issues.add('UNSAFE_ENTRY', `${at}.source`, `contents for ${treePath} are ${data.length} bytes, more than the ${budget.remaining} bytes left in the decode budget`);
    return null;
  }
  budget.remaining -= data.length;
  const hash = r.verification?.hash;
  if (hash !== undefined) {
    const dash = hash.indexOf('-');
    const algo = hash.slice(0, dash);
    const want = hash.slice(dash + 1).toLowerCase();
    const got = createHash(algo).update(data).digest('hex');
    if (got !== want) {
      issues.add('SOURCE_CORRUPT', `${at}.verification.hash`, `contents for ${treePath} do not match the hash: expected ${algo}-${want}, got ${algo}-${got}`);
      return null;
    }
  }
  return data;
}
