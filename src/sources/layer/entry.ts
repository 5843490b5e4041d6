/**
 * One entry of a layer as its reader found it (a tar header, a directory walk),
 * before any check: paths and link targets are still whatever the source said.
 */
export type LayerEntryKind = 'file' | 'dir' | 'symlink' | 'hardlink' | 'char-device' | 'block-device' | 'fifo' | 'socket' | 'unsupported';

export interface LayerEntry {
  /** The path as stored in the source (normally a string; checked by entry-checks). */
  path: unknown;
  kind: LayerEntryKind;
  /** The source's own name for the type, for messages ("SparseFile", "FIFO"). */
  typeName: string;
  /** Content bytes of a file (0 for anything else). */
  size: number;
  mode?: number;
  uid?: number;
  gid?: number;
  /** Seconds since the epoch. */
  mtime?: number;
  /** Where a file's body starts in the (decompressed) stream, when the reader knows it. */
  offset?: number;
  /** Extended attributes ([name, value], sorted by name): PAX SCHILY.xattr records, a directory's own. */
  xattrs?: [string, Buffer][];
  /** A symlink's target, or the path a hardlink points at (unchecked). */
  linkpath?: unknown;
  /**
   * A file's content. Valid only until the next entry is read: the reader streams the
   * archive, so an entry's body exists only while the reader is positioned on it.
   */
  open?: () => AsyncIterable<Uint8Array>;
}

/** Something that can read a layer's entries, from the start, as often as asked. */
export interface LayerReader {
  /** For messages: "layer /tmp/app.tar.gz". */
  where: string;
  entries(): AsyncIterable<LayerEntry>;
}
