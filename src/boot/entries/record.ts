/**
 * The record of the last boot-entry sync that found nothing to write (boot-entries.json in
 * the sysroot): what the entries were for and the identity of every path that sync read.
 * While the state asks for the same entries and every one of those paths has the identity
 * it had, a sync would read the same and write nothing again, so `open` skips it.
 *
 * Why it cannot lie: it is written only by a sync that wrote nothing, as that sync's last
 * step (atomic, durable), and only when every stamp it saw is older than the sync's start
 * by more than any filesystem's timestamp granularity (FAT: 2 s), so that a later change
 * gets a stamp of its own; a sync that is going to look at the disk again removes it
 * first, durably, before it writes anything (a crash at any later point leaves no record).
 */
import type { DurableFs } from '../../fs/trees/durable.js';
import { writeJson } from '../../fs/trees/durable.js';
import { readText } from '../../fs/core/host-paths.js';
import type { KernelImage } from '../../state/boot-entry-text.js';
import { unchangedSince, type Identity } from './seen-paths.js';
import type { MountProof } from './mount-proof.js';

/** Every stamp a record keeps is older than its sync's start by more than this (FAT's 2 s granularity, the kernel's coarse clock tick). */
export const STAMP_MARGIN_MS = 3000;

export interface BootEntriesRecord {
  v: 1;
  /** When the sync that made it started (ms, the context's clock). */
  at: number;
  /** What the entries were for (entriesKey in sync.ts: the loader, the boot directory, `stagedroot=`, the entries' text). */
  want: string;
  /** Each bootable deployment's kernel as that sync found it (null: it ships none). */
  kernels: Record<string, KernelImage | null>;
  /** Every path that sync read, with its identity then (SeenPaths.entries: relative to the sysroot when under it). */
  seen: [string, Identity][];
  /** The sysroot's place on its filesystem with what proves it still is (mount-proof.ts), when that sync read mountinfo and there is a proof. */
  mounts: MountProof | null;
}

const isKernel = (k: unknown): k is KernelImage => {
  const o = k as Record<string, unknown>;
  return typeof o === 'object' && o !== null && typeof o.version === 'string' && typeof o.hash === 'string' && typeof o.kernelPath === 'string' && (o.initrdPath === null || typeof o.initrdPath === 'string');
};

const isIdentity = (id: unknown): id is Identity => id === null || (Array.isArray(id) && id.length === 5 && id.every((x) => typeof x === 'number'));

const isSeen = (seen: unknown): seen is [string, Identity][] => Array.isArray(seen) && seen.every((e) => Array.isArray(e) && e.length === 2 && typeof e[0] === 'string' && isIdentity(e[1]));

const isProof = (m: unknown): m is MountProof => {
  const o = m as Record<string, unknown>;
  if (typeof o !== 'object' || o === null || !isSeen(o.seen) || !Array.isArray(o.root) || o.root.length !== 2 || !o.root.every((x) => typeof x === 'number')) return false;
  const fp = o.fp as Record<string, unknown>;
  return typeof fp === 'object' && fp !== null && typeof fp.mountPoint === 'string' && typeof fp.mountRoot === 'string' && typeof fp.onFilesystem === 'string' && typeof fp.dev === 'number';
};

/** Checked by hand, not by a schema: it is read on every `open` with a boot directory, and anything else is no record. */
function asRecord(x: unknown): BootEntriesRecord | null {
  const r = x as Record<string, unknown>;
  if (typeof r !== 'object' || r === null || r.v !== 1 || typeof r.at !== 'number' || typeof r.want !== 'string') return null;
  if (typeof r.kernels !== 'object' || r.kernels === null || !Object.values(r.kernels).every((k) => k === null || isKernel(k))) return null;
  if (!isSeen(r.seen) || !(r.mounts === null || isProof(r.mounts))) return null;
  return r as unknown as BootEntriesRecord;
}

/** The record (null when absent, torn or foreign), and whether a file is there at all (a sync removes it before writing). */
export function readBootEntriesRecord(file: string): { present: boolean; record: BootEntriesRecord | null } {
  const text = readText(file);
  if (text === null) return { present: false, record: null };
  try {
    return { present: true, record: asRecord(JSON.parse(text)) };
  } catch {
    return { present: true, record: null };
  }
}

/** Written by a sync that wrote nothing, last; nothing when a stamp it saw is too recent to tell a later change apart. */
export function writeBootEntriesRecord(dfs: DurableFs, file: string, r: BootEntriesRecord, newestCtimeMs: number): void {
  if (newestCtimeMs >= r.at - STAMP_MARGIN_MS) return;
  writeJson(dfs, file, r);
}

/**
 * True when the record says the entries on disk are the ones `want` asks for and nothing
 * it read has changed since. A clock that went back past the record's sync makes the
 * stamps' order unknown: not trusted then.
 */
export function recordHolds(r: BootEntriesRecord, want: string, now: number, root: string): boolean {
  return r.want === want && now >= r.at && unchangedSince(r.seen, root);
}
