import type { KernelArgumentChange } from './state/kernel-args.js';
import type { ConfigRecord } from './state/config-record.js';
import type { Issue } from './errors.js';
import type { RootFs } from './fs/trees/root-fs.js';
import type { ReadOnlyTree } from './fs/trees/read-only-tree.js';

/**
 * The typed filesystem operations every source turns into. Sources build these
 * without touching the disk; src/apply-changes.ts applies them through the
 * safe-fs layer, in order.
 */
export type Content =
  | { kind: 'bytes'; data: Uint8Array }
  /** Streamed content (archives): opened when applied, never held whole in memory. */
  | {
      kind: 'stream';
      size?: number;
      open: () => AsyncIterable<Uint8Array>;
      /**
       * A file of the layer store with exactly this content and the op's attributes: a
       * stage may hardlink it where its copy policy links (usr/) instead of writing the
       * stream; everything else (a copy elsewhere, a shared directory, a dry run) streams.
       * `sha256` is of its content (the manifest then need not read a linked file).
       */
      linkFrom?: { file: string; sha256: string };
    };

export interface Owner {
  uid?: number;
  gid?: number;
}

/**
 * Extended attributes an entry is created with (file capabilities, SELinux labels,
 * ACLs, user.*): [name, value] pairs. Absent: none of its own.
 */
export type { XattrList } from './fs/core/xattr.js';
import type { XattrList } from './fs/core/xattr.js';

/**
 * `replace` gives OCI layer semantics: whatever is at the path is removed first (a
 * directory with its contents; for `mkdir`, anything that is not a directory, a symlink
 * included, since a directory over a directory keeps it and takes the new attributes).
 */
export type ChangeOp =
  | ({ op: 'write'; path: string; content: Content; mode?: number; mtime?: number; overwrite?: boolean; append?: boolean; replace?: boolean; xattrs?: XattrList } & Owner)
  | ({ op: 'mkdir'; path: string; mode?: number; mtime?: number; replace?: boolean; xattrs?: XattrList } & Owner)
  | ({ op: 'symlink'; path: string; target: string; overwrite?: boolean; replace?: boolean; xattrs?: XattrList } & Owner)
  | { op: 'hardlink'; path: string; target: string; overwrite?: boolean; replace?: boolean }
  /** `missingOk` also covers a missing or non-directory parent (nothing there to remove). */
  | { op: 'remove'; path: string; recursive?: boolean; missingOk?: boolean }
  /**
   * Removes every child of a directory, keeping it (an OCI opaque whiteout). The last
   * component is not followed; a missing directory is nothing to clear; "" is the root.
   */
  | { op: 'clear'; path: string }
  | ({ op: 'setattr'; path: string; mode?: number; mtime?: number } & Owner);

/** What entries under shared directories (var/) mean: see ChangeSet.sharedContent. */
export type SharedContent = 'initial' | 'desired';

export interface ChangeSet {
  /** A few words for status and logs ("update spec web.json: 3 files"). */
  description: string;
  /** A label the source suggests (the spec's own label). */
  label?: string;
  /** Operations in the order they are applied; async for streamed archives. */
  ops: Iterable<ChangeOp> | AsyncIterable<ChangeOp>;
  /** Number of operations when known (for progress). */
  count?: number;
  /**
   * What entries under the sysroot's shared directories (var/) mean. 'initial' (layers,
   * images, directories; the default): content for paths the shared directory does not
   * have yet, never overwriting state. 'desired' (specs, Ignition configs): the agent's
   * desired state, applied at finalize, each previous version kept aside.
   */
  sharedContent?: SharedContent;
  /**
   * Things the source accepted but that people should hear about (an unknown field it
   * ignored, a mode bit the spec version drops). They reach the stage's result.
   */
  warnings?: readonly Issue[];
  /** Changes to the kernel arguments the new deployment inherits from its parent. */
  kernelArguments?: KernelArgumentChange;
  /**
   * A config source's record (its name, the kernel arguments it added, the paths it
   * owns), kept beside the new deployment for the next config to read. Absent: the
   * base deployment's record is carried over (without its paths when the source is an
   * image, which replaces them all).
   */
  config?: ConfigRecord;
  /**
   * A second change set, planned against the tree once `ops` are applied: a config over
   * the OS image it names is checked against that image's tree (its etc/passwd, its
   * existing files), not the booted one. Applied after `ops`, before `finish`.
   */
  onTop?: (tree: ReadOnlyTree) => Promise<ChangeSet>;
  /**
   * Called after the ops are applied, e.g. to enable units. Writes only through the given
   * root. Returns the warnings found on the finished tree (they join `warnings`).
   */
  finish?: (root: RootFs) => Promise<Issue[] | void>;
  /**
   * A command to run inside the new tree once the ops are applied (`stage --run`): in a
   * private mount and PID namespace, the tree its root. The tree is then a private copy
   * (nothing hardlinked with another deployment), its manifest walked whole.
   */
  runInTree?: { command: string; timeoutMs: number; binds?: readonly string[] };
}

/**
 * A layer blob as an image has it: its bytes, and what names them. `digest` is of the
 * bytes `open` yields (the manifest's layer digest: compressed, or not); `diffId` of the
 * uncompressed tar. At least one is given; each given one is checked over the stream.
 */
export interface StorableLayer {
  digest?: string;
  diffId?: string;
  /** The size the descriptor declares (the stream stops at the first byte more), or null. */
  size?: number | null;
  /** For messages: "image /srv/img: blob sha256:… (layer 2 of 3)". */
  where: string;
  /** The blob's bytes, from the start (called once per import that reads it). */
  open(): AsyncIterable<Buffer>;
}

export function bytes(data: string | Uint8Array): Content {
  return { kind: 'bytes', data: typeof data === 'string' ? Buffer.from(data, 'utf8') : data };
}
