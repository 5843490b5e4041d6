import { StagedrootError } from '../../errors.js';

/**
 * OCI layer markers (image-spec layer.md): an empty `.wh.NAME` deletes NAME from the
 * lower layers; `.wh..wh..opq` in a directory hides all of that directory's lower
 * children. Both apply to lower layers only and never appear in the result. Other
 * `.wh..wh.` names are reserved (aufs bookkeeping) and refused rather than guessed at.
 */
export const WHITEOUT_PREFIX = '.wh.';
export const OPAQUE_MARKER = '.wh..wh..opq';

export type Marker = { kind: 'whiteout'; target: string } | { kind: 'opaque'; dir: string };

/** The marker a checked tree path is, or null for an ordinary entry. */
export function markerOf(p: string): Marker | null {
  const slash = p.lastIndexOf('/');
  const dir = slash === -1 ? '' : p.slice(0, slash);
  const name = p.slice(slash + 1);
  if (!name.startsWith(WHITEOUT_PREFIX)) return null;
  if (name === OPAQUE_MARKER) return { kind: 'opaque', dir };
  if (name.startsWith(WHITEOUT_PREFIX + WHITEOUT_PREFIX)) {
    throw new StagedrootError('SOURCE_UNSUPPORTED', `The entry ${JSON.stringify(p)} uses the reserved whiteout prefix ".wh..wh." (only ".wh..wh..opq" is supported)`, { path: p });
  }
  const target = name.slice(WHITEOUT_PREFIX.length);
  if (target === '' || target === '.' || target === '..') {
    throw new StagedrootError('SOURCE_CORRUPT', `The entry ${JSON.stringify(p)} is a whiteout that names no entry`, { path: p });
  }
  return { kind: 'whiteout', target: dir === '' ? target : `${dir}/${target}` };
}
