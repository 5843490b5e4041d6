import type { ManifestEntry } from './manifest-line.js';

/** Same type, mode, owner, extended attributes, content and target (times are not compared). */
export function sameEntry(a: ManifestEntry | null, b: ManifestEntry | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.t !== b.t || a.m !== b.m || a.u !== b.u || a.g !== b.g || a.x !== b.x) return false;
  if (a.t === 'f') return a.s === b.s && a.h === b.h;
  if (a.t === 'l') return a.l === b.l;
  return true;
}

/** A path that is a directory on one side and not on the other (neither the /etc merge nor the shared directories can carry it). */
export interface TypeConflict {
  path: string;
  local: string;
  update: string;
}
