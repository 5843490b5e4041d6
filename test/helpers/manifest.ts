import { readManifest } from '../../src/fs/manifests/manifest.js';
import type { ManifestEntry } from '../../src/fs/manifests/manifest-line.js';

/** The cache keys of a manifest entry: they name one inode at one time, not what a tree holds. */
export type Keyless<T> = Omit<T, 'mt' | 'i' | 'c'>;

/** An entry without its cache keys (mtime, inode, ctime): what two copies of one tree share. */
export function keyless<T extends { mt?: number; i?: number; c?: number }>(e: T): Keyless<T> {
  const { mt: _mt, i: _i, c: _c, ...rest } = e;
  return rest;
}

/** A manifest's entries without their cache keys. */
export function keylessEntries(file: string): Keyless<ManifestEntry>[] {
  return [...readManifest(file)].map(keyless);
}
