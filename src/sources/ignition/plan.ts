import { bytes, type ChangeOp, type ChangeSet, type Owner } from '../../changeset.js';
import { isStagedrootError, type StagedrootError } from '../../errors.js';
import { normalizeTreePath } from '../../fs/core/paths.js';
import type { EntryStats, ReadOnlyTree } from '../../fs/trees/read-only-tree.js';
import type { RootFs } from '../../fs/trees/root-fs.js';
import { UNIT_DIR } from '../../systemd/unit-dirs.js';
import { IssueList } from './issues.js';
import { parseGroup, parsePasswd, type GroupEntry, type PasswdEntry } from './passwd.js';
import { decodeResource, DecodeBudget } from './resource.js';
import type { CheckedIgnition } from './parse.js';
import type { IgnitionConfig, IgnitionOwner } from './schema.js';
import { applyUnitActions, type UnitAction } from './unit-links.js';

export interface PlanOptions {
  /** Bytes all decoded (and decompressed) contents may take together (default 128 MiB). */
  maxDecodedBytes?: number;
}

export const DEFAULT_MAX_DECODED_BYTES = 128 * 1024 * 1024;

/** Ignition's default home for `core` when the tree's etc/passwd does not list it. */
const CORE_HOME = '/home/core';

/**
 * Turns a checked Ignition config into a change set, against the tree it will be applied
 * over. Everything that can be known before writing is checked here and reported
 * together: contents decoded and verified, names resolved in the tree's own etc/passwd
 * and etc/group, `overwrite: false` against existing paths. Ops follow Ignition's order:
 * users' SSH keys, directories (parents first), files, links, units; enabling and
 * unmasking run in `finish`, on the finished tree, because they depend on every unit
 * file in it.
 */
export function planIgnition({ config: cfg, warnings }: CheckedIgnition, tree: ReadOnlyTree, describe: string, opts: PlanOptions = {}): ChangeSet {
  const issues = new IssueList();
  const budget = new DecodeBudget(opts.maxDecodedBytes ?? DEFAULT_MAX_DECODED_BYTES);
  const files = cfg.storage?.files ?? [];
  const dirs = cfg.storage?.directories ?? [];
  const links = cfg.storage?.links ?? [];
  const units = cfg.systemd?.units ?? [];
  const users = cfg.passwd?.users ?? [];

  checkUnique(cfg, issues);

  // Contents first: the tree's etc/passwd may itself be written by this config.
  const decoded = files.map((f, i) => {
    const p = normalizeTreePath(f.path);
    const at = `storage.files[${i}]`;
    const contents = f.contents === undefined ? null : decodeResource(f.contents, `${at}.contents`, f.path, budget, issues);
    const appended = (f.append ?? []).map((a, j) => decodeResource(a, `${at}.append[${j}]`, f.path, budget, issues) ?? Buffer.alloc(0));
    return { path: p, contents, append: appended.length ? Buffer.concat(appended) : null };
  });
  const plannedText = (p: string): string => {
    const own = decoded.find((d) => d.path === p);
    const start = own?.contents ?? tree.readFile(p) ?? Buffer.alloc(0);
    return Buffer.concat([start, own?.append ?? Buffer.alloc(0)]).toString('utf8');
  };
  // Read only when a name is looked up: a tree whose etc/passwd cannot be read fails only configs that need it.
  const user = lazyLookup(() => parsePasswd(plannedText('etc/passwd')), 'etc/passwd', issues);
  const group = lazyLookup(() => parseGroup(plannedText('etc/group')), 'etc/group', issues);
  const owner = (u: IgnitionOwner | undefined, g: IgnitionOwner | undefined, at: string): Owner => resolveOwner(u, g, at, user, group, issues);

  const ops: ChangeOp[] = [];
  // What is at a path in the base tree; a path that cannot be resolved (a symlink loop,
  // absurd depth) is an issue of the entry that names it.
  const exists = (p: string, at: string): EntryStats | null | undefined => {
    try {
      return tree.lstat(p);
    } catch (err) {
      if (!isStagedrootError(err)) throw err;
      issues.add(err.code, at, err.message);
      return undefined;
    }
  };

  // passwd.users: only existing users, and their SSH keys.
  users.forEach((u, i) => {
    const at = `passwd.users[${i}]`;
    const found = user(u.name, `${at}.name`);
    if (found === null) return;
    const entry: Pick<PasswdEntry, 'home'> & Partial<PasswdEntry> | undefined = found ?? (u.name === 'core' ? { home: CORE_HOME } : undefined);
    if (entry === undefined) {
      issues.add('SOURCE_UNSUPPORTED', `${at}.name`, `the user ${u.name} is not in the tree's etc/passwd, and creating users is not supported`);
      return;
    }
    const keys = u.sshAuthorizedKeys ?? [];
    if (keys.length === 0) return;
    let home: string;
    try {
      home = normalizeTreePath(entry.home, `home directory of ${u.name}`);
    } catch (err) {
      issues.add('PATH_ESCAPE', `${at}.name`, (err as Error).message);
      return;
    }
    // Keys replace ~/.ssh/authorized_keys (0600, in a 0700 .ssh, owned by the user): the file the
    // machine-config-daemon manages. Ignition itself, provisioning once, writes the fragment
    // ~/.ssh/authorized_keys.d/ignition instead (spec: passwd.users[].sshAuthorizedKeys).
    const ids = { uid: entry.uid, gid: entry.gid };
    ops.push({ op: 'mkdir', path: `${home}/.ssh`, mode: 0o700, ...ids });
    ops.push({ op: 'write', path: `${home}/.ssh/authorized_keys`, content: bytes(keys.join('\n') + '\n'), mode: 0o600, overwrite: true, ...ids });
  });

  // storage.directories, parents before children (Ignition sorts them by depth).
  const byDepth = dirs.map((d, i) => ({ d, i, p: normalizeTreePath(d.path) })).sort((a, b) => a.p.split('/').length - b.p.split('/').length);
  for (const { d, i, p } of byDepth) {
    const at = `storage.directories[${i}]`;
    const e = exists(p, `${at}.path`);
    if (e === undefined) continue;
    if (d.overwrite === true) {
      if (e !== null) ops.push({ op: 'remove', path: p, recursive: true, missingOk: true });
    } else if (e !== null && tree.stat(p)?.isDirectory() !== true) {
      issues.add('APPLY_FAILED', `${at}.path`, `${d.path} exists in the tree and is not a directory, and overwrite is false`);
      continue;
    }
    ops.push({ op: 'mkdir', path: p, mode: d.mode, ...owner(d.user, d.group, at) });
  }

  // storage.files
  files.forEach((f, i) => {
    const at = `storage.files[${i}]`;
    const { path: p, contents, append } = decoded[i]!;
    const ids = owner(f.user, f.group, at);
    const e = exists(p, `${at}.path`);
    if (e === undefined) return;
    const hasSource = f.contents?.source !== undefined;
    if (f.overwrite === true) {
      if (e?.isDirectory()) ops.push({ op: 'remove', path: p, recursive: true, missingOk: true });
    } else if (e !== null && (hasSource || !e.isFile())) {
      issues.add('APPLY_FAILED', `${at}.path`, hasSource ? `${f.path} already exists in the tree and overwrite is false` : `${f.path} exists in the tree and is not a regular file`);
      return;
    }
    const keep = e?.isFile() === true && !hasSource && f.overwrite !== true; // no source over an existing file: keep its contents
    if (!keep) {
      ops.push({ op: 'write', path: p, content: bytes(contents ?? Buffer.alloc(0)), mode: f.mode ?? 0o644, overwrite: f.overwrite === true, ...ids });
    }
    if (append !== null) ops.push({ op: 'write', path: p, content: bytes(append), append: true, mode: f.mode, ...ids });
    else if (keep && (f.mode !== undefined || ids.uid !== undefined || ids.gid !== undefined)) ops.push({ op: 'setattr', path: p, mode: f.mode, ...ids });
  });

  // storage.links, after files so hard link targets exist.
  links.forEach((l, i) => {
    const at = `storage.links[${i}]`;
    const p = normalizeTreePath(l.path);
    const e = exists(p, `${at}.path`);
    if (e === undefined) return;
    const hard = l.hard === true;
    const target = hard ? normalizeTreePath(l.target) : l.target;
    const ids = hard ? {} : owner(l.user, l.group, at); // owners are ignored for hard links (spec)
    if (l.overwrite === true) {
      if (e?.isDirectory()) ops.push({ op: 'remove', path: p, recursive: true, missingOk: true });
    } else if (e !== null) {
      // An identical link is kept; Ignition then only sets the owner of a symlink.
      const same = hard ? sameInode(e, exists(target, `${at}.target`) ?? null) : tree.readlink(p) === l.target;
      if (!same) issues.add('APPLY_FAILED', `${at}.path`, `${l.path} already exists in the tree and overwrite is false`);
      else if (!hard && (ids.uid !== undefined || ids.gid !== undefined)) ops.push({ op: 'setattr', path: p, ...ids });
      return;
    }
    if (hard) ops.push({ op: 'hardlink', path: p, target, overwrite: l.overwrite === true });
    else ops.push({ op: 'symlink', path: p, target, overwrite: l.overwrite === true, ...ids });
  });

  // systemd.units: files and masks now; unmask/enable/disable in finish.
  const actions: UnitAction[] = [];
  units.forEach((u, i) => {
    const unitPath = `${UNIT_DIR}/${u.name}`;
    (u.dropins ?? []).forEach((d, j) => {
      if (d.contents === undefined) {
        // As Ignition: a drop-in without contents is not written. Said, never dropped silently.
        issues.warn('DROPIN_NOT_WRITTEN', `systemd.units[${i}].dropins[${j}].contents`, `the drop-in ${d.name} of ${u.name} has no contents, so it is not written (an empty string writes an empty drop-in)`);
        return;
      }
      // An empty drop-in is written too: it masks a vendor drop-in of the same name.
      ops.push({ op: 'write', path: `${unitPath}.d/${d.name}`, content: bytes(d.contents), mode: 0o644, overwrite: true });
    });
    if (u.mask === true) ops.push({ op: 'symlink', path: unitPath, target: '/dev/null', overwrite: true });
    else if (u.contents !== undefined && u.contents !== '') ops.push({ op: 'write', path: unitPath, content: bytes(u.contents), mode: 0o644, overwrite: true });
    if (u.mask === false || u.enabled !== undefined) actions.push({ at: `systemd.units[${i}]`, name: u.name, enabled: u.enabled, mask: u.mask });
  });

  // kernelArguments came with spec 3.3.0; shouldExist/shouldNotExist as Ignition applies them.
  const kargs = cfg.kernelArguments;
  if (kargs && ['3.0.0', '3.1.0', '3.2.0'].includes(cfg.ignition.version)) {
    issues.add('SOURCE_UNSUPPORTED', 'kernelArguments', `kernelArguments is part of Ignition spec 3.3.0 and later, not ${cfg.ignition.version}`);
  }

  issues.throwIfAny(`The Ignition config ${describe} cannot be applied`);

  const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
  const dropins = units.reduce((n, u) => n + (u.dropins?.length ?? 0), 0);
  const summary = [count(files.length, 'file'), count(dirs.length, 'directory', 'directories'), count(links.length, 'link'), count(units.length, 'unit'), count(dropins, 'drop-in'), count(users.length, 'user')];
  return {
    description: `Ignition ${cfg.ignition.version} ${describe}: ${summary.join(', ')}${kargs ? `, ${(kargs.shouldExist?.length ?? 0) + (kargs.shouldNotExist?.length ?? 0)} kernel argument changes` : ''}`,
    ...(kargs ? { kernelArguments: kargs } : {}),
    ops,
    count: ops.length,
    sharedContent: 'desired',
    warnings: [...warnings, ...issues.warnings],
    ...(actions.length ? { finish: async (root: RootFs) => applyUnitActions(root, actions) } : {}),
  };
}

function sameInode(a: { ino: number; dev: number } | null, b: { ino: number; dev: number } | null): boolean {
  return a !== null && b !== null && a.ino === b.ino && a.dev === b.dev;
}

/** A name lookup: the entry, undefined when the name is unknown, null when the database cannot be read (an issue at `at`). */
type Lookup<T> = (name: string, at: string) => T | undefined | null;

function lazyLookup<T>(load: () => Map<string, T>, file: string, issues: IssueList): Lookup<T> {
  let db: Map<string, T> | StagedrootError | undefined;
  return (name, at) => {
    if (db === undefined) {
      try {
        db = load();
      } catch (err) {
        if (!isStagedrootError(err)) throw err;
        db = err;
      }
    }
    if (db instanceof Map) return db.get(name);
    issues.add(db.code, at, `cannot read the tree's ${file}: ${db.message}`);
    return null;
  };
}

/** user/group by id, or by name in the tree's etc/passwd and etc/group; an unknown name is an error naming the field. */
function resolveOwner(u: IgnitionOwner | undefined, g: IgnitionOwner | undefined, at: string, user: Lookup<PasswdEntry>, group: Lookup<GroupEntry>, issues: IssueList): Owner {
  const out: Owner = {};
  if (u?.id !== undefined) out.uid = u.id;
  else if (u?.name !== undefined) {
    const e = user(u.name, `${at}.user.name`);
    if (e === undefined) issues.add('SPEC_INVALID', `${at}.user.name`, `no user named ${JSON.stringify(u.name)} in the tree's etc/passwd`);
    else if (e !== null) out.uid = e.uid;
  }
  if (g?.id !== undefined) out.gid = g.id;
  else if (g?.name !== undefined) {
    const e = group(g.name, `${at}.group.name`);
    if (e === undefined) issues.add('SPEC_INVALID', `${at}.group.name`, `no group named ${JSON.stringify(g.name)} in the tree's etc/group`);
    else if (e !== null) out.gid = e.gid;
  }
  return out;
}

/** Ignition's uniqueness rules, and no storage entry at a path a unit writes. */
function checkUnique(cfg: IgnitionConfig, issues: IssueList): void {
  const seen = new Map<string, string>();
  const claim = (key: string, at: string, what: string) => {
    const first = seen.get(key);
    if (first !== undefined) issues.add('SPEC_INVALID', at, `${what} is also given by ${first}`);
    else seen.set(key, at);
  };
  const kinds = [['files', cfg.storage?.files], ['directories', cfg.storage?.directories], ['links', cfg.storage?.links]] as const;
  for (const [kind, list] of kinds) (list ?? []).forEach((e, i) => claim(`path:${normalizeTreePath(e.path)}`, `storage.${kind}[${i}].path`, `the path ${e.path}`));
  (cfg.systemd?.units ?? []).forEach((u, i) => {
    claim(`unit:${u.name}`, `systemd.units[${i}].name`, `the unit ${u.name}`);
    const unitFile = `path:${UNIT_DIR}/${u.name}`;
    if (seen.has(unitFile) && (u.contents || u.mask === true)) issues.add('SPEC_INVALID', `systemd.units[${i}].name`, `the unit file /${UNIT_DIR}/${u.name} is also written by ${seen.get(unitFile)}`);
    (u.dropins ?? []).forEach((d, j) => {
      claim(`dropin:${u.name}/${d.name}`, `systemd.units[${i}].dropins[${j}].name`, `the drop-in ${d.name} of ${u.name}`);
      const dropinFile = `path:${UNIT_DIR}/${u.name}.d/${d.name}`;
      if (seen.has(dropinFile) && d.contents !== undefined) issues.add('SPEC_INVALID', `systemd.units[${i}].dropins[${j}].name`, `the drop-in /${UNIT_DIR}/${u.name}.d/${d.name} is also written by ${seen.get(dropinFile)}`);
    });
  });
  (cfg.passwd?.users ?? []).forEach((u, i) => {
    claim(`user:${u.name}`, `passwd.users[${i}].name`, `the user ${u.name}`);
    (u.sshAuthorizedKeys ?? []).forEach((k, j) => claim(`key:${u.name}:${k}`, `passwd.users[${i}].sshAuthorizedKeys[${j}]`, 'the same SSH key'));
  });
}
