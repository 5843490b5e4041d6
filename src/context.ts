import { DurableFs } from './fs/trees/durable.js';
import { noFaults, type FaultHook } from './fs/core/faults.js';
import { parseStoragePreference, type StoragePreference } from './fs/trees/storage.js';
import type { XattrPolicy } from './fs/core/xattr.js';
import { Layout } from './state/layout.js';

/** What an operation needs, passed in (no hidden globals): where, how to write, the clock, reporting. */
export interface Context {
  layout: Layout;
  dfs: DurableFs;
  faults: FaultHook;
  now: () => Date;
  /** Non-fatal notes for the user (recovered state, skipped entries). */
  warn: (message: string) => void;
  /** How new deployment trees are stored (see src/fs/trees/storage.ts). */
  storage: StoragePreference;
  /** An extended attribute the sysroot's filesystem refuses: an error, or dropped with a warning. */
  xattrPolicy: XattrPolicy;
}

export interface ContextOptions {
  faults?: FaultHook;
  now?: () => Date;
  onWarning?: (message: string) => void;
  /**
   * `auto` (the default): deployment trees are btrfs subvolumes where the sysroot is on
   * btrfs; `portable`: plain directories everywhere. Default from STAGEDROOT_STORAGE.
   */
  storage?: StoragePreference;
  /** 'strict' (default): an attribute the filesystem refuses fails the operation; 'drop': dropped with a warning. */
  xattrPolicy?: XattrPolicy;
}

export function makeContext(sysroot: string, o: ContextOptions = {}): Context {
  const faults = o.faults ?? noFaults;
  return {
    layout: new Layout(sysroot),
    dfs: new DurableFs(faults),
    faults,
    now: o.now ?? (() => new Date()),
    warn: o.onWarning ?? (() => {}),
    storage: parseStoragePreference(o.storage ?? process.env.STAGEDROOT_STORAGE, o.storage === undefined ? 'STAGEDROOT_STORAGE' : 'storage'),
    xattrPolicy: o.xattrPolicy ?? 'strict',
  };
}
