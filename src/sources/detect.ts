import { StagedrootError } from '../errors.js';
import { readBytes, readHead, statPath } from '../fs/durable.js';
import { directorySource } from './directory.js';
import { MAX_DOCUMENT_BYTES, readJsonDocument } from './document.js';
import type { LayerOptions } from './layer-plan.js';
import type { Source } from './source.js';
import { specSource } from './spec.js';
import { ignitionFileSource } from './ignition/index.js';
import { tarLayerSource } from './tar-layer.js';

export type SourceKind = 'spec' | 'ignition' | 'tar' | 'directory';

/** Decides what a path holds from its content, not its name. */
export function detectKind(p: string): SourceKind {
  const st = statPath(p);
  if (st === null) throw new StagedrootError('USAGE', `The source ${p} does not exist`, { value: p });
  if (st.isDirectory()) return 'directory';
  const head = readHead(p, 512);
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'tar'; // gzip
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'tar'; // zstd
  if (head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'tar';
  const text = head.toString('utf8').trimStart();
  if (text.startsWith('{')) {
    return /"ignition"\s*:/.test(readBytes(p, MAX_DOCUMENT_BYTES)!.toString('utf8')) ? 'ignition' : 'spec';
  }
  throw new StagedrootError('SOURCE_UNSUPPORTED', `Cannot tell what ${p} is: not a JSON update spec, an Ignition config, a tar archive or a directory`, { path: p });
}

/** Options for sources read from a path; `replace` and `limits` apply to tar and directory sources. */
export type SourceOptions = LayerOptions;

/** A source for a path, its kind detected from the content. */
export function sourceFromPath(p: string, o: SourceOptions = {}): Source {
  const kind = detectKind(p);
  if (o.replace && kind !== 'tar' && kind !== 'directory') {
    throw new StagedrootError('USAGE', `--replace applies to tar and directory sources; ${p} is a ${kind} source`, { option: 'replace', value: true });
  }
  switch (kind) {
    case 'spec':
      return specFileSource(p);
    case 'ignition':
      return ignitionFileSource(p);
    case 'tar':
      return tarLayerSource(p, o);
    case 'directory':
      return directorySource(p, o);
  }
}

/**
 * A source for a path whose kind is detected when the stage plans it, so that content
 * that cannot be recognised is a failed stage (recorded in lastFailure), like any other
 * bad source. A path that does not exist is a usage error, at once.
 */
export function pathSource(p: string, o: SourceOptions = {}): Source {
  if (statPath(p) === null) throw new StagedrootError('USAGE', `The source ${p} does not exist`, { value: p });
  if (o.replace) sourceFromPath(p, o); // --replace with a spec or Ignition config is a usage error, at once
  return {
    kind: 'auto',
    describe: p,
    plan: (base) => sourceFromPath(p, o).plan(base),
  };
}

export function specFileSource(p: string): Source {
  return {
    kind: 'spec',
    describe: `spec ${p}`,
    async plan(base) {
      return specSource(readJsonDocument(p, 'The update spec'), `spec ${p}`).plan(base);
    },
  };
}
