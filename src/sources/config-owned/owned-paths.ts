import { normalizeTreePath } from '../../fs/core/paths.js';
import type { ReadOnlyTree } from '../../fs/trees/read-only-tree.js';
import type { ConfigRecord, Original, OwnedKind, OwnedPath } from '../../state/config-record.js';
import { LINK_DIR_SUFFIXES, UNIT_DIR } from '../../systemd/unit-dirs.js';
import type { IgnitionConfig } from '../ignition/schema.js';

/** An original larger than this is not kept: letting the path go then deletes it (said in a warning). */
export const MAX_ORIGINAL_BYTES = 4 * 1024 * 1024;

/**
 * The paths an Ignition config owns: its files, directories and links, the unit files and
 * masks it writes, its drop-ins, and the units it enables (their links). SSH keys are
 * not owned: the users' authorized_keys is the machine's, replaced whole by each config.
 */
export function pathsOf(cfg: IgnitionConfig): { path: string; kind: OwnedKind }[] {
  const out: { path: string; kind: OwnedKind }[] = [];
  for (const f of cfg.storage?.files ?? []) out.push({ path: normalizeTreePath(f.path), kind: 'file' });
  for (const d of cfg.storage?.directories ?? []) out.push({ path: normalizeTreePath(d.path), kind: 'directory' });
  for (const l of cfg.storage?.links ?? []) out.push({ path: normalizeTreePath(l.path), kind: 'link' });
  for (const u of cfg.systemd?.units ?? []) {
    if (u.mask === true || (u.contents !== undefined && u.contents !== '')) out.push({ path: `${UNIT_DIR}/${u.name}`, kind: 'unit' });
    for (const d of u.dropins ?? []) if (d.contents !== undefined) out.push({ path: `${UNIT_DIR}/${u.name}.d/${d.name}`, kind: 'dropin' });
    if (u.enabled === true) out.push({ path: u.name, kind: 'enabled' });
  }
  return out;
}

/**
 * What the config owns in the new deployment, each path with the base image's version:
 * carried from the previous record when the previous config owned the path already (the
 * version from before any config of this owner wrote it), else read from the tree the
 * config is applied over (the booted tree, or the image's tree for a config over its
 * image). Returns warnings for originals too large to keep.
 */
export function ownedPaths(cfg: IgnitionConfig, tree: ReadOnlyTree, prior: ConfigRecord | null): { owned: OwnedPath[]; warnings: string[] } {
  const before = new Map((prior?.owned ?? []).map((o) => [key(o), o]));
  const warnings: string[] = [];
  const named = pathsOf(cfg);
  const owned = [...named, ...createdParents(named, tree, before)].map(({ path, kind }): OwnedPath => {
    const kept = before.get(key({ path, kind }));
    if (kept !== undefined) return kept;
    if (kind === 'enabled') return { path, kind, original: null, wasEnabled: isEnabledIn(tree, path) };
    const original = originalOf(tree, path);
    if (original === 'too-large') {
      warnings.push(`/${path} in the base tree is larger than ${MAX_ORIGINAL_BYTES} bytes: its version is not kept, so when a later config no longer writes it, it is deleted`);
      return { path, kind, original: null };
    }
    return { path, kind, original };
  });
  return { owned, warnings };
}

/**
 * The directories the config creates to hold its paths (Ignition makes missing parents):
 * those the base tree lacks, and those the previous config of this owner created.
 */
function createdParents(named: { path: string; kind: OwnedKind }[], tree: ReadOnlyTree, before: Map<string, OwnedPath>): { path: string; kind: OwnedKind }[] {
  const explicit = new Set(named.filter((n) => n.kind !== 'enabled').map((n) => n.path));
  const walked = new Set<string>();
  const out: { path: string; kind: OwnedKind }[] = [];
  for (const n of named) {
    if (n.kind === 'enabled') continue;
    for (let p = parentOf(n.path); p !== '' && !walked.has(p); p = parentOf(p)) {
      walked.add(p);
      if (explicit.has(p)) continue;
      if (before.has(key({ path: p, kind: 'directory' })) || tree.lstat(p) === null) out.push({ path: p, kind: 'directory' });
    }
  }
  return out;
}

const parentOf = (p: string): string => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '');

export const key = (o: { path: string; kind: OwnedKind }): string => `${o.kind === 'enabled' ? 'enabled' : 'path'}:${o.path}`;

/** The entry at `p` in the tree, as kept in a record (null: nothing there). */
export function originalOf(tree: ReadOnlyTree, p: string): Original | null | 'too-large' {
  const st = tree.lstat(p);
  if (st === null) return null;
  const ids = { uid: st.uid, gid: st.gid };
  if (st.isSymbolicLink()) return { type: 'symlink', target: tree.readlink(p)!, ...ids };
  if (st.isDirectory()) return { type: 'directory', mode: st.mode & 0o7777, ...ids };
  if (!st.isFile()) return null;
  if (st.size > MAX_ORIGINAL_BYTES) return 'too-large';
  return { type: 'file', mode: st.mode & 0o7777, ...ids, data: tree.readFile(p)!.toString('base64') };
}

/** Whether any link in etc/systemd/system's .wants/.requires/.upholds directories enables the unit. */
export function isEnabledIn(tree: ReadOnlyTree, name: string): boolean {
  return enablementLinks(tree, name).length > 0;
}

/** The links enabling a unit: `X.wants/NAME` (and .requires, .upholds) under etc/systemd/system. */
export function enablementLinks(tree: ReadOnlyTree, name: string): string[] {
  const out: string[] = [];
  for (const dir of tree.readdir(UNIT_DIR) ?? []) {
    if (!LINK_DIR_SUFFIXES.some((s) => dir.endsWith(s))) continue;
    const p = `${UNIT_DIR}/${dir}/${name}`;
    if (tree.lstat(p)?.isSymbolicLink()) out.push(p);
  }
  return out.sort();
}
