import { StagedrootError, type Issue } from '../../errors.js';
import type { ReadOnlyTree } from '../../fs/trees/read-only-tree.js';
import type { RootFs } from '../../fs/trees/root-fs.js';
import { LINK_DIR_SUFFIXES, UNIT_DIR, UNIT_SEARCH_PATH, unitFileCandidates } from '../../systemd/unit-dirs.js';
import { hasInstallInfo, parseInstall, type InstallInfo } from '../../systemd/unit-install.js';
import { expandSpecifiers, isInstance, isTemplate, parseUnitName, unitNameProblem, withInstance, type UnitName } from '../../systemd/unit-names.js';

/**
 * Enabling, disabling and unmasking units inside a tree, as `systemctl --root=TREE
 * enable|disable|unmask` would, but written through RootFs. Why not run systemctl
 * itself: every write inside a deployment must go through the safe-fs layer (chroot
 * resolution, the manifest's touch events, fault injection, deferred durability), and
 * systemctl writes on its own. The links are the same ones systemctl 252 makes (tests
 * compare both on copies of the same tree), with one difference on purpose: enabling
 * first removes the unit's existing links (`systemctl reenable`), so `.wants/` links left
 * by an older [Install] section do not survive an update.
 */

export interface UnitAction {
  /** Field path of the config entry, for errors ("systemd.units[2]"). */
  at: string;
  name: string;
  enabled?: boolean;
  mask?: boolean;
}

interface Found {
  /** Absolute path inside the tree, as systemctl writes it in link targets. */
  path: string;
  install: InstallInfo;
}

/**
 * Applies unmask, then enable/disable, for each unit in config order. Returns warnings:
 * enabling a unit the tree has nowhere is not an error (Ignition writes a preset line,
 * which systemd ignores for a missing unit), but it is said.
 */
export function applyUnitActions(root: RootFs, actions: readonly UnitAction[]): Issue[] {
  const units = new UnitLinks(root);
  for (const a of actions) {
    if (a.mask === false) units.unmask(a.name);
    if (a.enabled === true) units.enable(a.name, a.at, new Set());
    if (a.enabled === false) units.disable(a.name, a.at, new Set());
  }
  return units.warnings;
}

/** A symlink in etc/systemd/system (top level) or in one of its .wants/.requires/.upholds directories. */
interface LinkEntry {
  name: string;
  target: string;
  top: boolean;
}

class UnitLinks {
  /** Reads go through a view that cannot write; writes only through link()/unlink(). */
  private readonly tree: ReadOnlyTree;
  /** The links, read once and kept up to date: every change below goes through link()/unlink(). */
  private index: Map<string, LinkEntry> | null = null;
  readonly warnings: Issue[] = [];

  constructor(private readonly root: RootFs) {
    this.tree = root.readOnly();
  }

  unmask(name: string): void {
    const p = `${UNIT_DIR}/${name}`;
    if (this.links().get(p)?.target === '/dev/null') this.unlink(p);
  }

  enable(name: string, at: string, seen: Set<string>): void {
    if (seen.has(name)) return;
    seen.add(name);
    const found = this.find(name, true, at);
    if (found === 'masked') throw fail(at, `Cannot enable ${name}: it is masked (add "mask": false to unmask it)`);
    if (found === null) {
      const message = `${name} is not enabled: no unit file for it in the tree (looked in ${UNIT_SEARCH_PATH.map((d) => '/' + d).join(', ')}); Ignition would write a preset that systemd ignores for a missing unit`;
      this.warnings.push({ code: 'UNIT_NOT_FOUND', path: at, message, severity: 'warning' });
      return;
    }
    const unit = parseUnitName(name);
    const { install } = found;
    this.removeLinks(unit, found);
    if (!hasInstallInfo(install)) return; // systemctl: "no installation config", nothing to do

    let linked = unit;
    if (isTemplate(unit) && install.wantedBy.length + install.requiredBy.length + install.upheldBy.length > 0) {
      if (install.defaultInstance === null) throw fail(at, `Cannot enable the template ${name}: it has no DefaultInstance=; enable an instance such as ${withInstance(unit, 'NAME')}`);
      linked = parseUnitName(checkedName(withInstance(unit, install.defaultInstance), at, name, 'DefaultInstance='));
    }
    const deps: [string[], string][] = [[install.wantedBy, '.wants'], [install.requiredBy, '.requires'], [install.upheldBy, '.upholds']];
    for (const [targets, suffix] of deps) {
      for (const raw of targets) {
        let target = parseUnitName(checkedName(expand(raw, linked, at), at, name, 'its [Install] section'));
        if (isTemplate(target)) {
          if (!isInstance(linked)) throw fail(at, `Cannot enable ${name}: the target ${target.name} is a template and ${linked.name} has no instance`);
          target = parseUnitName(withInstance(target, linked.instance!));
        }
        this.link(`${UNIT_DIR}/${target.name}${suffix}/${linked.name}`, found.path);
      }
    }
    for (const raw of install.alias) {
      const alias = this.aliasName(expand(raw, unit, at), unit, at);
      if (alias === name) continue;
      const existing = this.tree.lstat(`${UNIT_DIR}/${alias}`);
      if (existing !== null && !existing.isSymbolicLink()) throw fail(at, `Cannot enable ${name}: its alias ${UNIT_DIR}/${alias} exists and is not a link`);
      this.link(`${UNIT_DIR}/${alias}`, found.path);
    }
    for (const raw of install.also) this.enable(checkedName(expand(raw, unit, at), at, name, 'Also='), at, seen);
  }

  disable(name: string, at: string, seen: Set<string>): void {
    if (seen.has(name)) return;
    seen.add(name);
    // A masked unit is still disabled: its [Install] is read from below the mask.
    const found = this.find(name, false, at);
    const unit = parseUnitName(name);
    this.removeLinks(unit, found === 'masked' ? null : found);
    if (found === null || found === 'masked') return;
    for (const raw of found.install.also) this.disable(checkedName(expand(raw, unit, at), at, name, 'Also='), at, seen);
  }

  /**
   * The unit file systemd would load for `name`: the first in the search path, an
   * instance falling back to its template. A link to /dev/null (or an empty file) first
   * in line means masked; `honourMask: false` looks past a mask in etc/systemd/system.
   */
  private find(name: string, honourMask: boolean, at: string): Found | 'masked' | null {
    try {
      return this.findUnchecked(name, honourMask);
    } catch (err) {
      if (!(err instanceof StagedrootError)) throw err;
      // A unit file that is there but cannot be read (a link loop, an I/O error): its
      // [Install] section is unknown, so the unit cannot be enabled or disabled safely.
      throw fail(at, `Cannot ${honourMask ? 'enable' : 'disable'} ${name}: its unit file cannot be read: ${err.message}`);
    }
  }

  private findUnchecked(name: string, honourMask: boolean): Found | 'masked' | null {
    for (const file of unitFileCandidates(name)) {
      for (const dir of UNIT_SEARCH_PATH) {
        const p = `${dir}/${file}`;
        if (this.tree.lstat(p) === null) continue;
        if (this.tree.readlink(p) === '/dev/null') {
          if (honourMask || dir !== UNIT_DIR) return 'masked';
          continue;
        }
        if (this.tree.stat(p)?.isFile() !== true) continue;
        const text = this.tree.readFile(p)!;
        if (text.length === 0) {
          if (honourMask) return 'masked';
          continue;
        }
        return { path: '/' + p, install: parseInstall(text.toString('utf8')) };
      }
    }
    return null;
  }

  /**
   * Removes the links `systemctl disable` removes: in etc/systemd/system and its
   * subdirectories, every symlink named after the unit or pointing at its unit file
   * (old aliases, `.wants/` links from any [Install] the unit ever had). The unit's own
   * entry (its file, or its mask) stays.
   */
  private removeLinks(unit: UnitName, found: Found | null): void {
    const fileName = found === null ? unit.name : found.path.slice(found.path.lastIndexOf('/') + 1);
    const matches = (linkName: string, target: string): boolean => {
      if (linkName === unit.name) return true;
      const pointsAtFile = target === found?.path || target.slice(target.lastIndexOf('/') + 1) === fileName;
      // Instances share their template's file: only links for this instance are its own.
      return pointsAtFile && (!isInstance(unit) || parseUnitName(linkName).instance === unit.instance);
    };
    for (const [p, l] of [...this.links()]) {
      if (l.top && l.name === unit.name) continue; // the unit's own file or mask
      if (matches(l.name, l.target)) this.unlink(p);
    }
  }

  private links(): Map<string, LinkEntry> {
    if (this.index !== null) return this.index;
    const index = new Map<string, LinkEntry>();
    for (const name of this.tree.readdir(UNIT_DIR) ?? []) {
      const p = `${UNIT_DIR}/${name}`;
      const target = this.tree.readlink(p);
      if (target !== null) {
        index.set(p, { name, target, top: true });
      } else if (this.tree.lstat(p)?.isDirectory() && LINK_DIR_SUFFIXES.some((s) => name.endsWith(s))) {
        for (const child of this.tree.readdir(p) ?? []) {
          const t = this.tree.readlink(`${p}/${child}`);
          if (t !== null) index.set(`${p}/${child}`, { name: child, target: t, top: false });
        }
      }
    }
    return (this.index = index);
  }

  private link(p: string, target: string): void {
    this.root.symlink(p, target, { overwrite: true });
    const rel = p.slice(UNIT_DIR.length + 1);
    this.links().set(p, { name: rel.slice(rel.lastIndexOf('/') + 1), target, top: !rel.includes('/') });
  }

  private unlink(p: string): void {
    this.root.remove(p);
    this.links().delete(p);
  }

  /** An Alias= value, checked the way systemd 252 checks it. */
  private aliasName(raw: string, unit: UnitName, at: string): string {
    const alias = parseUnitName(checkedName(raw, at, unit.name, 'Alias='));
    const bad = (why: string) => fail(at, `Cannot enable ${unit.name}: cannot alias it as ${alias.name}: ${why}`);
    if (alias.suffix !== unit.suffix) throw bad('an alias must have the same unit type');
    if (isTemplate(unit)) {
      if (!isTemplate(alias)) throw bad('the alias of a template must be a template');
      return alias.name;
    }
    if (isInstance(unit)) {
      if (isTemplate(alias)) return withInstance(alias, unit.instance!);
      if (alias.instance !== unit.instance) throw bad('the alias of an instance must be an instance with the same instance name');
      return alias.name;
    }
    if (alias.instance !== null) throw bad('the alias of a plain unit must be a plain unit');
    return alias.name;
  }
}

function expand(raw: string, unit: UnitName, at: string): string {
  try {
    return expandSpecifiers(raw, unit);
  } catch (err) {
    throw fail(at, `Cannot enable ${unit.name}: ${JSON.stringify(raw)} in its [Install] section: ${(err as Error).message}`);
  }
}

/** A unit name read from a unit file is as untrusted as the config: checked before it becomes a path. */
function checkedName(name: string, at: string, unit: string, where: string): string {
  const problem = unitNameProblem(name);
  if (problem !== null) throw fail(at, `Cannot enable ${unit}: ${JSON.stringify(name)} from ${where}: ${problem}`);
  return name;
}

function fail(at: string, message: string): StagedrootError {
  return new StagedrootError('APPLY_FAILED', message, { path: at, issues: [{ code: 'APPLY_FAILED', path: at, message, severity: 'error' }] });
}
