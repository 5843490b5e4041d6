import { StagedrootError } from '../errors.js';
import { readBytes, readHead, statPath } from '../fs/durable.js';
import { directorySource } from './directory.js';
import { MAX_DOCUMENT_BYTES, readJsonDocument } from './document.js';
import type { LayerOptions } from './layer-plan.js';
import type { Source } from './source.js';
import { specSource } from './spec.js';
import { ignitionFileSource } from './ignition/index.js';
import { tarLayerSource } from './tar-layer.js';
import { filePayload } from '../trust/payload.js';
import { indexImageArchive } from './oci/blob-store.js';
import { imageSource, isImageLayout } from './oci/image-source.js';
import type { ImageOptions } from './oci/resolve.js';

export type SourceKind = 'spec' | 'ignition' | 'tar' | 'directory' | 'image';

/** Decides what a path holds from its content, not its name. */
export function detectKind(p: string): SourceKind {
  const st = statPath(p);
  if (st === null) throw new StagedrootError('USAGE', `The source ${p} does not exist`, { value: p });
  if (st.isDirectory()) return isImageLayout(p) ? 'image' : 'directory';
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

/**
 * Options for sources read from a path; `replace` and `limits` apply to tar and directory
 * sources, `platform` and `ref` to images (an image is always a whole new tree).
 */
export type SourceOptions = LayerOptions & ImageOptions;

/** A source for a path, its kind detected from the content. */
export function sourceFromPath(p: string, o: SourceOptions = {}): Source {
  const kind = detectKind(p);
  if (o.replace && kind !== 'tar' && kind !== 'directory' && kind !== 'image') {
    throw new StagedrootError('USAGE', `--replace applies to tar and directory sources; ${p} is a ${kind} source`, { option: 'replace', value: true });
  }
  if ((o.platform !== undefined || o.ref !== undefined) && kind !== 'image' && kind !== 'tar') {
    throw new StagedrootError('USAGE', `--platform and --ref choose an image's manifest; ${p} is a ${kind} source`, { option: o.ref !== undefined ? 'ref' : 'platform', value: o.ref ?? o.platform });
  }
  switch (kind) {
    case 'spec':
      return signedFile(specFileSource(p), p);
    case 'ignition':
      return signedFile(ignitionFileSource(p), p);
    case 'tar':
      return archiveSource(p, o);
    case 'image':
      return imageSource(p, o);
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
  if (o.replace || o.platform !== undefined || o.ref !== undefined) sourceFromPath(p, o); // --replace with a spec, --ref with a directory: usage errors, at once
  let resolved: Source | undefined;
  const get = (): Source => (resolved ??= sourceFromPath(p, o));
  return {
    kind: 'auto',
    describe: p,
    inspect: async () => (get().inspect ? get().inspect!() : {}),
    plan: (base) => get().plan(base),
  };
}

/**
 * A tar archive: an image archive (oci-archive, `docker save`) when its entries say so,
 * else a layer. Only an uncompressed tar can be an image archive; deciding reads its
 * headers up to the first name an image archive cannot hold (usually the first one).
 */
function archiveSource(p: string, o: SourceOptions): Source {
  let chosen: Promise<Source> | undefined;
  const get = (): Promise<Source> =>
    (chosen ??= (async () => {
      const head = readHead(p, 512);
      const plain = head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar';
      // A tar the image scan cannot read is reported by the layer reader, with its own words.
      const members = plain ? await indexImageArchive(p).catch(() => null) : null;
      if (members) return imageSource(p, o, members);
      if (o.platform !== undefined || o.ref !== undefined) {
        throw new StagedrootError('USAGE', `--platform and --ref choose an image's manifest; ${p} is a tar layer, not an image archive`, { option: o.ref !== undefined ? 'ref' : 'platform', value: o.ref ?? o.platform });
      }
      return signedFile(tarLayerSource(p, o), p);
    })());
  return {
    kind: 'tar',
    describe: `archive ${p}`,
    inspect: async () => {
      const s = await get();
      return s.inspect ? s.inspect() : {};
    },
    plan: async (base) => (await get()).plan(base),
  };
}

/** A source read from one file: its detached signature covers the file, in SOURCE.minisig by default. */
function signedFile(s: Source, p: string): Source {
  return { ...s, inspect: async () => ({ signed: { payload: filePayload(p, s.describe), defaultSignature: `${p}.minisig` } }) };
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
