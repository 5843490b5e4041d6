import * as path from 'node:path';
import type { Context } from '../context.js';
import { readText, statPath } from '../fs/core/host-paths.js';
import type { BootRecord } from '../state/model.js';

/** Where the initramfs step records what it booted, and the root it made. */
export interface BootRecordPlace {
  /** Default /run/stagedroot (prepare-root writes `booted` there). */
  runDir?: string;
  /** The running system's root (default /): the record is trusted only when it is the recorded deployment's tree. */
  rootDir?: string;
}

const ID = /^\d{4,}$/;

/** Parses the `key=value` lines of /run/stagedroot/booted; null when malformed. */
export function parseBootRecord(text: string): BootRecord | null {
  const kv = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([a-z-]+)=(.*)$/.exec(line.trim());
    if (m) kv.set(m[1]!, m[2]!);
  }
  const id = kv.get('id');
  const tries = kv.get('tries-left');
  const from = kv.get('fell-back-from');
  if (id === undefined || !ID.test(id)) return null;
  if (tries !== undefined && !/^\d+$/.test(tries)) return null;
  if (from !== undefined && !ID.test(from)) return null;
  return { id, triesLeft: tries === undefined ? null : Number(tries), fellBackFrom: from ?? null };
}

/**
 * What prepare-root booted, when it booted this sysroot: the record names a deployment
 * whose tree is the running root (same device and inode). A record for another sysroot,
 * or none (no initramfs step, a temp-dir sysroot), gives null: `boot` then follows
 * `current` itself.
 */
export function readBootRecord(ctx: Context, place: BootRecordPlace = {}): BootRecord | null {
  const file = path.join(place.runDir ?? '/run/stagedroot', 'booted');
  const text = readText(file);
  if (text === null) return null;
  const record = parseBootRecord(text);
  if (record === null) {
    ctx.warn(`${file} is malformed; following current instead`);
    return null;
  }
  const root = statPath(place.rootDir ?? '/');
  const tree = statPath(ctx.layout.tree(record.id));
  if (root === null || tree === null || root.dev !== tree.dev || root.ino !== tree.ino) {
    ctx.warn(`${file} names deployment ${record.id}, but the running root is not its tree in ${ctx.layout.root}; following current instead`);
    return null;
  }
  return record;
}
