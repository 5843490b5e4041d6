import * as path from 'node:path';
import { StagedrootError } from '../../errors.js';
import { SourceFile } from '../../fs/core/file-chunks.js';
import { statPath } from '../../fs/core/host-paths.js';
import { DEFAULT_LAYER_LIMITS } from '../layer/entry-checks.js';
import { readTarEntries } from '../tar/reader.js';

/** One file of an image (a blob, index.json, manifest.json), opened for streaming. */
export interface OpenBlob {
  size: number;
  head(n: number): Buffer;
  chunks(): AsyncIterable<Buffer>;
  /** Throws SOURCE_CORRUPT when the file changed since it was opened. */
  assertUnchanged(): void;
  close(): void;
}

/**
 * The files of an image, by their path in the layout ("index.json", "blobs/sha256/HEX"):
 * a directory, or a tar archive read in place (no extraction).
 */
export interface BlobStore {
  describe: string;
  /** Size of a file, or null when the image has no such file. */
  size(name: string): number | null;
  open(name: string): OpenBlob;
}

/** Only plain relative names: a blob path from a manifest may not leave the image. */
export function checkName(name: string, where: string): string {
  const n = name.replace(/^\.\//, '');
  if (n === '' || n.startsWith('/') || n.split('/').some((c) => c === '..' || c === '' || c === '.') || n.includes('\0')) {
    throw new StagedrootError('PATH_ESCAPE', `${where} names the file ${JSON.stringify(name)}, which is not a plain path inside the image`, { path: name });
  }
  return n;
}

/** An OCI image layout (or a docker save tree) in a directory. */
export function directoryStore(root: string): BlobStore {
  const describe = `image ${root}`;
  return {
    describe,
    size(name) {
      const st = statPath(path.join(root, checkName(name, describe)));
      return st?.isFile() ? st.size : null;
    },
    open(name) {
      const f = SourceFile.open(path.join(root, checkName(name, describe)));
      return { size: f.size, head: (n) => f.head(n), chunks: () => f.chunks(), assertUnchanged: () => f.assertUnchanged(), close: () => f.close() };
    },
  };
}

interface Member {
  offset: number;
  size: number;
}

/** Entries an image archive holds; a root filesystem layer has other names (etc/, usr/). */
const IMAGE_MEMBER = /^(oci-layout|index\.json|manifest\.json|repositories|blobs(\/.*)?|[0-9a-f]{64}(\.json|\.tar|\/.*)?)$/;

/**
 * Indexes an uncompressed tar by reading its headers (bodies are skipped): name → where
 * its body is. Stops at the first name no image archive holds and returns null: that
 * tar is a filesystem layer, not an image.
 */
export async function indexImageArchive(p: string): Promise<Map<string, Member> | null> {
  const file = SourceFile.open(p);
  const members = new Map<string, Member>();
  const links = new Map<string, string>();
  try {
    const limits = { ...DEFAULT_LAYER_LIMITS, maxBytes: Number.MAX_SAFE_INTEGER };
    for await (const e of readTarEntries(file.chunks(), `archive ${p}`, limits)) {
      const name = String(e.path).replace(/^\.\//, '').replace(/\/$/, '');
      if (name === '' || name === '.') continue;
      if (!IMAGE_MEMBER.test(name)) return null;
      if (e.kind === 'file') members.set(name, { offset: e.offset!, size: e.size });
      else if ((e.kind === 'symlink' || e.kind === 'hardlink') && typeof e.linkpath === 'string') links.set(name, e.kind === 'symlink' ? path.posix.join(path.posix.dirname(name), e.linkpath) : e.linkpath);
    }
  } finally {
    file.close();
  }
  // docker save links legacy layer paths to blobs/: follow one level
  for (const [name, target] of links) {
    const m = members.get(target.replace(/^\.\//, ''));
    if (m) members.set(name, m);
  }
  return members.has('manifest.json') || (members.has('index.json') && members.has('oci-layout')) ? members : null;
}

/** An image archive (oci-archive or docker save), read in place through byte ranges. */
export function archiveStore(p: string, members: Map<string, Member>): BlobStore {
  const describe = `image ${p}`;
  const identity = SourceFile.open(p);
  const id = identity.identity;
  identity.close();
  return {
    describe,
    size(name) {
      return members.get(checkName(name, describe))?.size ?? null;
    },
    open(name) {
      const m = members.get(checkName(name, describe));
      if (!m) throw new StagedrootError('SOURCE_CORRUPT', `${describe} has no file ${name}`, { path: name });
      const f = SourceFile.open(p);
      if (f.identity !== id) {
        f.close();
        throw new StagedrootError('SOURCE_CORRUPT', `The source ${p} changed while it was being staged`, { path: p });
      }
      return {
        size: m.size,
        head: (n) => f.headAt(m.offset, Math.min(n, m.size)),
        chunks: () => f.chunks(m.offset, m.offset + m.size),
        assertUnchanged: () => f.assertUnchanged(),
        close: () => f.close(),
      };
    },
  };
}
