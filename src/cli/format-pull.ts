import type { ImageCheck } from '../sources/registry/check.js';

/** What `--check` found for an image in a registry (stage, upgrade, switch), for people. */
export function formatCheck(c: ImageCheck, upToDate: boolean, against = 'the booted deployment'): string {
  const needed = c.layers.filter((l) => !l.present);
  const lines = [
    `image ${c.pullspec} from ${c.registry}`,
    `digest ${c.digest}${c.indexDigest ? ` (in the index ${c.indexDigest})` : ''}${c.version !== undefined ? `, version ${c.version}` : ''}`,
    upToDate ? `${against} already runs this image: nothing to stage` : `an update: ${against} runs another image`,
    `layers: ${c.layers.length - needed.length} of ${c.layers.length} present (${c.bytesPresent} bytes), ${needed.length} to fetch (${c.bytesNeeded} bytes)`,
    ...needed.map((l) => `  to fetch ${l.digest} ${l.size - l.partial} bytes${l.partial ? ` (${l.partial} already fetched)` : ''}`),
  ];
  return lines.join('\n') + '\n';
}
