import { StagedrootError } from '../errors.js';
import { readHead, statPath } from '../fs/core/host-paths.js';
import { directorySource } from './directory.js';
import { parseJsonDocument, readDocumentBytes } from './document.js';
import type { LayerOptions } from './layer/plan.js';
import type { Source, SourceInfo } from './source.js';
import { specSource } from './spec.js';
import { ignitionDocumentSource } from './ignition/index.js';
import { tarLayerSource } from './tar/layer-source.js';
import { isMachineConfig, machineConfigDocumentSource, parseMachineConfigText, type MachineConfigOptions } from './machine-config/index.js';
import { bytesPayload, filePayload } from '../trust/payload.js';
import { indexImageArchive } from './oci/blob-store.js';
import { imageSource, isImageLayout } from './oci/image-source.js';
import type { ImageOptions } from './oci/resolve.js';
import { isRegistryReference, parseDockerReference } from './registry/reference.js';
import { registrySource, type RegistrySourceOptions } from './registry/source.js';

export type SourceKind = 'spec' | 'ignition' | 'machine-config' | 'tar' | 'directory' | 'image';

/** Decides what a path holds from its content, not its name. */
export function detectKind(p: string): SourceKind {
  return detect(p).kind;
}

/**
 * What a path holds. A JSON document (spec, Ignition config) is read whole once (at most
 * MAX_DOCUMENT_BYTES): its kind is decided from these bytes, and they are what is planned
 * and signed.
 */
type Detected = { kind: 'spec' | 'ignition' | 'machine-config'; document: Buffer } | { kind: 'tar' | 'directory' | 'image' };

function detect(p: string): Detected {
  const st = statPath(p);
  if (st === null) throw new StagedrootError('USAGE', `The source ${p} does not exist`, { value: p });
  if (st.isDirectory()) return { kind: isImageLayout(p) ? 'image' : 'directory' };
  const head = readHead(p, 512);
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return { kind: 'tar' }; // gzip
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return { kind: 'tar' }; // zstd
  if (head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return { kind: 'tar' };
  if (head.toString('utf8').trimStart().startsWith('{')) {
    const document = readDocumentBytes(p, 'The source');
    const text = document.toString('utf8');
    // Decided from the document itself (the head was read first: the file may have changed since).
    if (text.trimStart().startsWith('{')) {
      // A MachineConfig holds an Ignition config (spec.config): its kind is looked at first.
      if (/"kind"\s*:\s*"MachineConfig"/.test(text) && isMachineConfig(parsedOrNull(text))) return { kind: 'machine-config', document };
      return { kind: /"ignition"\s*:/.test(text) ? 'ignition' : 'spec', document };
    }
  }
  if (looksLikeYaml(head)) {
    const document = readDocumentBytes(p, 'The source');
    // Text that is not YAML, or YAML that is not a MachineConfig: the message below says what is read.
    if (isMachineConfig(yamlOrNull(document.toString('utf8'), p))) return { kind: 'machine-config', document };
  }
  throw new StagedrootError('SOURCE_UNSUPPORTED', `Cannot tell what ${p} is: not a JSON update spec, an Ignition config, a MachineConfig (YAML or JSON), a tar archive or a directory`, { path: p });
}

function parsedOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function yamlOrNull(text: string, p: string): unknown {
  try {
    return parseMachineConfigText(text, p);
  } catch {
    return null;
  }
}

/** Text (no NUL in the head) whose first line is a YAML key, a comment or a document start. */
function looksLikeYaml(head: Buffer): boolean {
  if (head.includes(0)) return false;
  return /^(\s*(#[^\n]*)?\n)*\s*(---|[A-Za-z_"'][^\n]*:)/.test(head.toString('utf8'));
}

/**
 * Options for sources read from a path; `replace` and `limits` apply to tar and directory
 * sources, `platform` and `ref` to images (an image is always a whole new tree).
 */
export type SourceOptions = LayerOptions &
  ImageOptions &
  Pick<MachineConfigOptions, 'imageStore' | 'owner'> &
  Pick<RegistrySourceOptions, 'authfile' | 'blobDir' | 'certsDir' | 'onProgress' | 'onBlob' | 'onMirrorFailed' | 'registriesConf' | 'policy' | 'registriesD'> & {
    /** A MachineConfig's spec.osImageURL is pulled from its registry when no imageStore is given (with authfile, certsDir, blobDir). */
    pull?: boolean;
  };

/** A source for a path, its kind detected from the content; `docker://…` is an image in a registry. */
export function sourceFromPath(p: string, o: SourceOptions = {}): Source {
  if (isRegistryReference(p) || (p.startsWith('docker:') && statPath(p) === null)) return fromRegistry(p, o);
  const detected = detect(p);
  const { kind } = detected;
  if (o.replace && kind !== 'tar' && kind !== 'directory' && kind !== 'image') {
    throw new StagedrootError('USAGE', `--replace applies to tar and directory sources; ${p} is a ${kind} source`, { option: 'replace', value: true });
  }
  if (o.pull && o.imageStore !== undefined) throw new StagedrootError('USAGE', '--pull and --image-store are two places for the image spec.osImageURL names: give one', { option: 'pull', value: true });
  if (o.pull && kind !== 'machine-config') throw new StagedrootError('USAGE', `--pull applies to MachineConfig sources (their spec.osImageURL); ${p} is a ${kind} source`, { option: 'pull', value: true });
  if ((o.authfile !== undefined || o.certsDir !== undefined || o.blobDir !== undefined || o.registriesConf !== undefined || o.policy !== undefined || o.registriesD !== undefined) && !(kind === 'machine-config' && o.pull)) {
    const option = o.authfile !== undefined ? 'authfile' : o.certsDir !== undefined ? 'certsDir' : o.blobDir !== undefined ? 'blobDir' : o.registriesConf !== undefined ? 'registriesConf' : o.policy !== undefined ? 'policy' : 'registriesD';
    throw new StagedrootError('USAGE', `--authfile, --certs-dir, --blob-dir, --registries-conf, --policy and --registries-d apply to images in a registry (docker://…, or a MachineConfig's osImageURL with --pull); ${p} is a ${kind} source`, { option, value: o[option] });
  }
  if ((o.imageStore !== undefined || o.owner !== undefined) && kind !== 'machine-config') {
    throw new StagedrootError('USAGE', `--image-store and --owner apply to MachineConfig sources; ${p} is a ${kind} source`, { option: o.imageStore !== undefined ? 'imageStore' : 'owner', value: o.imageStore ?? o.owner });
  }
  if ((o.platform !== undefined || o.ref !== undefined) && kind !== 'image' && kind !== 'tar' && !(kind === 'machine-config' && o.ref === undefined)) {
    throw new StagedrootError('USAGE', `--platform and --ref choose an image's manifest; ${p} is a ${kind} source`, { option: o.ref !== undefined ? 'ref' : 'platform', value: o.ref ?? o.platform });
  }
  switch (detected.kind) {
    case 'spec':
      return signedDocument(specDocumentSource(p, detected.document), p, detected.document, { overBase: true });
    case 'ignition':
      return signedDocument(ignitionDocumentSource(p, detected.document), p, detected.document, { overBase: true });
    case 'machine-config':
      return signedDocument(machineConfigDocumentSource(p, detected.document, { imageStore: o.imageStore, owner: o.owner, platform: o.platform, ...(o.pull ? { registry: registryOptions(o) } : {}) }), p, detected.document);
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
  if (isRegistryReference(p) || (p.startsWith('docker:') && statPath(p) === null)) return fromRegistry(p, o);
  if (statPath(p) === null) throw new StagedrootError('USAGE', `The source ${p} does not exist`, { value: p });
  if (o.replace || o.platform !== undefined || o.ref !== undefined || o.imageStore !== undefined || o.owner !== undefined || o.authfile !== undefined || o.certsDir !== undefined || o.blobDir !== undefined || o.registriesConf !== undefined || o.policy !== undefined || o.registriesD !== undefined || o.pull) sourceFromPath(p, o); // --replace with a spec, --ref with a directory: usage errors, at once
  let resolved: Source | undefined;
  const get = (): Source => (resolved ??= sourceFromPath(p, o));
  return {
    kind: 'auto',
    describe: p,
    inspect: async () => (get().inspect ? get().inspect!() : {}),
    plan: (base, c) => get().plan(base, c),
  };
}

/** `docker://HOST[:PORT]/REPO(:TAG|@DIGEST)`: pulled when inspected (src/sources/registry/). */
function fromRegistry(p: string, o: SourceOptions): Source {
  const ref = parseDockerReference(p, { what: 'The source' });
  if (o.pull) throw new StagedrootError('USAGE', `--pull applies to MachineConfig sources (their spec.osImageURL); ${p} is pulled anyway`, { option: 'pull', value: true });
  if (o.ref !== undefined || o.imageStore !== undefined || o.owner !== undefined) {
    const option = o.ref !== undefined ? 'ref' : o.imageStore !== undefined ? 'imageStore' : 'owner';
    throw new StagedrootError('USAGE', `--${option === 'imageStore' ? 'image-store' : option} does not apply to an image in a registry (${p}): its reference names the image`, { option, value: o[option] });
  }
  return registrySource(ref, { ...(o.platform ? { platform: o.platform } : {}), ...registryOptions(o) });
}

/** How a registry image is pulled, from the source options. */
function registryOptions(o: SourceOptions): RegistrySourceOptions {
  return { ...(o.authfile !== undefined ? { authfile: o.authfile } : {}), ...(o.blobDir !== undefined ? { blobDir: o.blobDir } : {}), ...(o.certsDir !== undefined ? { certsDir: o.certsDir } : {}), ...(o.limits ? { limits: o.limits } : {}), ...(o.onProgress ? { onProgress: o.onProgress } : {}), ...(o.onBlob ? { onBlob: o.onBlob } : {}), ...(o.onMirrorFailed ? { onMirrorFailed: o.onMirrorFailed } : {}), ...(o.registriesConf !== undefined ? { registriesConf: o.registriesConf } : {}), ...(o.policy !== undefined ? { policy: o.policy } : {}), ...(o.registriesD !== undefined ? { registriesD: o.registriesD } : {}) };
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
    plan: async (base, c) => (await get()).plan(base, c),
  };
}

/** A source read from one file: its detached signature covers the file, in SOURCE.minisig by default. */
function signedFile(s: Source, p: string): Source {
  return { ...s, inspect: async () => ({ signed: { payload: filePayload(p, s.describe), defaultSignature: `${p}.minisig` } }) };
}

/** A document read once: its signature (SOURCE.minisig by default) covers the very bytes that are planned; `info`: what else is known of it. */
function signedDocument(s: Source, p: string, data: Buffer, info: Pick<SourceInfo, 'overBase'> = {}): Source {
  return { ...s, inspect: async () => ({ ...(s.inspect ? await s.inspect() : {}), ...info, signed: { payload: bytesPayload(data, s.describe), defaultSignature: `${p}.minisig` } }) };
}

/** An update spec file already read (`data`: the bytes detected and signed), parsed when planned. */
function specDocumentSource(p: string, data: Buffer): Source {
  return {
    kind: 'spec',
    describe: `spec ${p}`,
    async plan(base) {
      return specSource(parseJsonDocument(data.toString('utf8'), `The update spec ${p}`), `spec ${p}`).plan(base);
    },
  };
}
