import type { RegistrySourceOptions } from '../sources/registry/source.js';
import type { Io } from './io.js';
import { bar, mb, redrawnLine } from './progress.js';

/**
 * A pull's progress, per layer: on a terminal a line redrawn on stderr (at most every
 * 100 ms) with the layer, its bytes in place of its size and what was already there;
 * with --json one JSON object a line on stderr (stdout keeps the one result), every MiB
 * of a layer and as each blob is in place; otherwise nothing (hooks and pipes get clean
 * output).
 */
export function pullProgress(io: Io, json: boolean): { options: Pick<RegistrySourceOptions, 'onProgress' | 'onBlob' | 'onMirrorFailed'>; done: () => void } {
  if (json) {
    const line = (v: unknown) => io.err(JSON.stringify(v) + '\n');
    return {
      options: {
        onProgress: (e) => line({ progress: 'fetch', ...e }),
        onBlob: (e) => line({ progress: 'blob', digest: e.digest, what: e.what, size: e.size, fetched: e.fetched, cached: e.cached, resumed: e.resumed }),
        onMirrorFailed: (e) => line({ progress: 'mirror-failed', mirror: e.mirror, code: e.error.code, message: e.error.message }),
      },
      done: () => {},
    };
  }
  const line = redrawnLine(io);
  // A mirror that fails is said in any case: the pull goes on from the next endpoint.
  const onMirrorFailed: RegistrySourceOptions['onMirrorFailed'] = (e) => io.err(`${line.drawn ? '\r\x1b[K' : ''}stagedroot: warning: the mirror ${e.mirror} failed (${e.error.message}); trying the next\n`);
  if (!io.errIsTty) return { options: { onMirrorFailed }, done: () => {} };
  return {
    options: {
      onMirrorFailed,
      onProgress(e) {
        line.draw(`[${bar(e.size ? e.bytes / e.size : 1)}] fetch    ${e.what} ${mb(e.bytes)} of ${mb(e.size)}${e.cached ? ` (${mb(e.cached)} already here)` : ''}`, e.bytes === e.size);
      },
    },
    done: () => line.clear(),
  };
}
