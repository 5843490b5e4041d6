import { StagedrootError } from '../../errors.js';
import type { BlobStore } from './blob-store.js';
import { checkDigest } from '../../util/digest-form.js';
import { blobPath, VerifiedStream } from './digest.js';
import { parseJsonDocument } from '../document.js';

/** Indexes, manifests and configs are small documents; a bigger one is refused, not read. */
export const MAX_JSON_BYTES = 4 * 1024 * 1024;

/** An OCI content descriptor (image-spec descriptor.md), checked. */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
  annotations?: Record<string, string>;
}

export function descriptor(v: unknown, what: string, where: string): Descriptor {
  const d = v as Partial<Descriptor> | null;
  if (d === null || typeof d !== 'object') throw new StagedrootError('SOURCE_CORRUPT', `${where}: ${what} is not a descriptor object`, {});
  const digest = checkDigest(d.digest, what, where);
  if (typeof d.mediaType !== 'string') throw new StagedrootError('SOURCE_CORRUPT', `${where}: ${what} (${digest}) has no mediaType`, { path: digest });
  if (!Number.isSafeInteger(d.size) || d.size! < 0) throw new StagedrootError('SOURCE_CORRUPT', `${where}: ${what} (${digest}) has no valid size`, { path: digest });
  return { mediaType: d.mediaType, digest, size: d.size!, platform: d.platform, annotations: d.annotations };
}

/** A blob's name in messages: "blob sha256:ab12... (the config)". */
export function blobName(digest: string, what: string): string {
  return `blob ${digest} (${what})`;
}

/** Checks that a blob is present with its declared size, without reading it. */
export function checkPresent(store: BlobStore, d: { digest: string; size: number }, what: string): void {
  const size = store.size(blobPath(d.digest));
  const name = blobName(d.digest, what);
  if (size === null) throw new StagedrootError('SOURCE_CORRUPT', `${store.describe} is incomplete: ${name} is missing`, { path: d.digest });
  if (size !== d.size) throw new StagedrootError('SOURCE_CORRUPT', `${store.describe}: ${name} is ${size} bytes, not the ${d.size} its descriptor declares (truncated or replaced)`, { path: d.digest });
}

/** Reads a whole file of the image (at most MAX_JSON_BYTES); null when it is absent. */
export async function readSmall(store: BlobStore, name: string): Promise<Buffer | null> {
  const size = store.size(name);
  if (size === null) return null;
  if (size > MAX_JSON_BYTES) throw new StagedrootError('UNSAFE_ENTRY', `${store.describe}: ${name} is ${size} bytes (limit ${MAX_JSON_BYTES} for an image document)`, { path: name });
  const f = store.open(name);
  try {
    const parts: Buffer[] = [];
    for await (const c of f.chunks()) parts.push(c);
    return Buffer.concat(parts);
  } finally {
    f.close();
  }
}

/** A small blob (manifest, config) read whole and checked against its descriptor. */
export async function readVerified(store: BlobStore, d: { digest: string; size: number }, what: string): Promise<Buffer> {
  checkPresent(store, d, what);
  const name = blobName(d.digest, what);
  if (d.size > MAX_JSON_BYTES) throw new StagedrootError('UNSAFE_ENTRY', `${store.describe}: ${name} is ${d.size} bytes (limit ${MAX_JSON_BYTES} for an image document)`, { path: d.digest });
  const f = store.open(blobPath(d.digest));
  try {
    const v = new VerifiedStream(f.chunks(), d.digest, d.size, `${store.describe}: ${name}`);
    const parts: Buffer[] = [];
    for await (const c of v) parts.push(c);
    await v.finish();
    return Buffer.concat(parts);
  } finally {
    f.close();
  }
}

export function parseJson(data: Buffer, name: string, where: string): Record<string, unknown> {
  const v = parseJsonDocument(data.toString('utf8'), `${where}: ${name}`, { code: 'SOURCE_CORRUPT', path: name });
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new StagedrootError('SOURCE_CORRUPT', `${where}: ${name} is not a JSON object`, { path: name });
  return v as Record<string, unknown>;
}
