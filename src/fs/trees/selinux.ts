import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { bytesOfName, hostPath } from '../core/names.js';
import { lstatInTree } from '../core/tree-lstat.js';
import type { RootFs } from './root-fs.js';
import type { TouchEvent } from '../manifests/patch-manifest.js';
import { readXattrs, writeXattrs, type XattrPolicy } from '../core/xattr.js';

/**
 * SELinux labels for what an update writes, chosen by the policy of the tree being
 * built (the new deployment's, not the host's), as ostree does. The labels come from
 * the system's own lookup, libselinux's `matchpathcon -f FILE_CONTEXTS` (Debian
 * selinux-utils) over the tree's own file_contexts: the same regular-expression
 * matching, precedence and `.subs` rules the policy is written for, no hand-written
 * matcher. Not `setfiles -r`: it relabels whole subtrees in place, and a subtree of a
 * new deployment holds inodes hardlinked with the booted one, which must never change.
 */

export interface TreePolicy {
  /** SELINUXTYPE from the tree's etc/selinux/config. */
  type: string;
  /** Host path of the tree's contexts/files/file_contexts. */
  fileContexts: string;
}

const SELINUX_XATTR = 'security.selinux';

/**
 * The policy a tree carries: its etc/selinux/config names a SELINUXTYPE whose
 * contexts/files/file_contexts exists in the tree (both resolved inside the tree).
 * null: the tree has no policy, and what is written stays unlabelled.
 */
export function treePolicy(root: RootFs): TreePolicy | null {
  let config: Buffer | null;
  try {
    config = root.readFile('etc/selinux/config');
  } catch {
    return null; // not a regular file, or a parent that is not a directory
  }
  if (config === null) return null;
  const m = /^\s*SELINUXTYPE\s*=\s*"?([A-Za-z0-9_.-]+)"?\s*$/m.exec(config.toString('utf8'));
  if (!m) return null;
  const type = m[1]!;
  const fc = root.resolve(`etc/selinux/${type}/contexts/files/file_contexts`, { followLast: true });
  if (fc.stat === null || !fc.stat.isFile()) return null;
  return { type, fileContexts: fc.hostPath };
}

/** matchpathcon's name for an entry's type. */
function lookupType(st: fs.Stats): string | null {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'lnk_file';
  if (st.isFIFO()) return 'pipe';
  if (st.isSocket()) return 'sock_file';
  if (st.isCharacterDevice()) return 'chr_file';
  if (st.isBlockDevice()) return 'blk_file';
  return null;
}

/**
 * The labels `policy` gives tree paths ("etc/motd" is looked up as "/etc/motd"), one
 * matchpathcon run per entry type, paths passed NUL-separated through xargs so that
 * names that are not UTF-8 keep their bytes. A path the policy has no label for maps
 * to null ("<<none>>").
 */
export function lookupLabels(policy: TreePolicy, byType: Map<string, string[]>): Map<string, string | null> {
  const out = new Map<string, string | null>();
  for (const [type, rels] of byType) {
    if (rels.length === 0) continue;
    const input = Buffer.concat(rels.flatMap((rel) => [Buffer.from('/'), bytesOfName(rel), Buffer.from([0])]));
    const r = spawnSync('xargs', ['-0', 'matchpathcon', '-N', '-n', '-f', policy.fileContexts, '-m', type, '--'], { input, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
    if (r.error) throw new StagedrootError('TOOL_MISSING', `Cannot run matchpathcon (Debian selinux-utils) to label what the update writes with the tree's SELinux policy (${policy.type}): ${r.error.message}`, { cause: r.error });
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    if (r.status !== 0 || lines.length !== rels.length) {
      const why = r.status === 127 ? 'matchpathcon is not installed (Debian selinux-utils)' : r.stderr.trim() || `exit ${r.status}`;
      throw new StagedrootError(r.status === 127 ? 'TOOL_MISSING' : 'IO', `Cannot look up SELinux labels in ${policy.fileContexts}: ${why}`, { path: policy.fileContexts });
    }
    rels.forEach((rel, i) => out.set(rel, lines[i] === '<<none>>' ? null : lines[i]!));
  }
  return out;
}

export interface LabelOptions {
  /** Paths whose label the source gave explicitly (a layer's security.selinux): kept. */
  keep?: ReadonlySet<string>;
  policy?: XattrPolicy;
  onDrop?: (rel: string, name: string, why: string) => void;
}

/**
 * Labels the entries at `rels` (tree paths an update, a merge or a layer wrote) with
 * the tree's policy. Skipped: paths gone again, paths in `keep`, and regular files with
 * more than one link, whose inode may be shared with another deployment (the update's
 * own files are new inodes). Returns the number of entries labelled.
 */
export function labelWritten(tree: string, policy: TreePolicy, rels: Iterable<string>, o: LabelOptions = {}): number {
  const byType = new Map<string, string[]>();
  const stats = new Map<string, fs.Stats>();
  const dirs = new Set<string>();
  for (const rel of rels) {
    if (rel === '' || o.keep?.has(rel) || stats.has(rel)) continue;
    // Inside the tree: a path under a symlink a later layer made is gone, not the link's target.
    const st = lstatInTree(tree, rel, dirs);
    if (st === null) continue;
    if (st.isFile() && st.nlink > 1) continue;
    const type = lookupType(st);
    if (type === null) continue;
    stats.set(rel, st);
    const list = byType.get(type) ?? [];
    list.push(rel);
    byType.set(type, list);
  }
  const labels = lookupLabels(policy, byType);
  let n = 0;
  for (const [rel, label] of labels) {
    if (label === null) continue;
    const host = hostPath(tree, rel);
    // libselinux stores a context with its terminating NUL.
    const value = Buffer.from(label + '\0', 'utf8');
    const now = readXattrs(host).find(([name]) => name === SELINUX_XATTR)?.[1];
    if (now !== undefined && now.equals(value)) continue;
    writeXattrs(host, [[SELINUX_XATTR, value]], { rel, policy: o.policy, onDrop: o.onDrop });
    n += 1;
  }
  return n;
}

/**
 * After an update or a merge wrote into `root`: when the tree carries a policy, labels
 * every entry the writes touched (and still exist) that was not given a label
 * explicitly. Returns the number labelled (0 without a policy).
 */
export function labelTouched(root: RootFs, events: readonly TouchEvent[], o: Omit<LabelOptions, 'keep'> = {}): number {
  const policy = treePolicy(root);
  if (policy === null) return 0;
  const written = new Set(events.filter((e) => e.kind === 'touch').map((e) => e.path));
  return labelWritten(root.root, policy, written, { ...o, keep: root.explicitLabels });
}
