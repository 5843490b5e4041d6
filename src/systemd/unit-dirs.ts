import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { isInstance, parseUnitName, templateOf, UNIT_SUFFIXES } from './unit-names.js';

/**
 * Where system units live in an offline tree, and what their files are called: the one
 * home of these facts for the Ignition source (enabling units) and the validators
 * (checking them). systemd.unit(5) "Unit File Load Path", system mode, minus the
 * directories that are empty offline (/run, generator output).
 */

/** Where the administrator's units, enablement links and masks go. */
export const UNIT_DIR = 'etc/systemd/system';

/** Where the OS's own (vendor) units are installed. */
export const VENDOR_UNIT_DIR = 'usr/lib/systemd/system';

/** The system unit search path, first wins (etc/ overrides usr/local/lib/, which overrides usr/lib/). */
export const UNIT_SEARCH_PATH: readonly string[] = [UNIT_DIR, 'usr/local/lib/systemd/system', VENDOR_UNIT_DIR, 'lib/systemd/system'];

/** Directories of dependency links next to unit files: `multi-user.target.wants/`. */
export const LINK_DIR_SUFFIXES = ['.wants', '.requires', '.upholds'] as const;

const SUFFIX = `(?:${UNIT_SUFFIXES.join('|')})`;
const UNIT_FILE = new RegExp(`^[^/]+\\.${SUFFIX}$`);
const DROPIN = new RegExp(`^([^/]+\\.${SUFFIX})\\.d/[^/]+\\.conf$`);
const LINK_DIR = new RegExp(`^([^/]+\\.${SUFFIX})(${LINK_DIR_SUFFIXES.map((s) => s.replace('.', '\\.')).join('|')})$`);

/** What a tree path is to systemd: a unit file, a drop-in of a unit, or neither. */
export type UnitPath = { kind: 'unit'; dir: string; unit: string } | { kind: 'dropin'; dir: string; unit: string; name: string } | null;

export function classifyUnitPath(p: string): UnitPath {
  const dir = UNIT_SEARCH_PATH.find((d) => p.startsWith(d + '/'));
  if (dir === undefined) return null;
  const rest = p.slice(dir.length + 1);
  if (UNIT_FILE.test(rest)) return { kind: 'unit', dir, unit: rest };
  const m = DROPIN.exec(rest);
  return m ? { kind: 'dropin', dir, unit: m[1]!, name: rest.slice(m[1]!.length + 3) } : null;
}

/** `multi-user.target.wants` → { unit: 'multi-user.target', kind: 'wants' }; null for other names. */
export function parseLinkDir(name: string): { unit: string; kind: 'wants' | 'requires' | 'upholds' } | null {
  const m = LINK_DIR.exec(name);
  return m ? { unit: m[1]!, kind: m[2]!.slice(1) as 'wants' | 'requires' | 'upholds' } : null;
}

/** The unit search path directories that exist in the tree, each once (lib -> usr/lib is the same directory). */
export function unitDirsIn(tree: ReadOnlyTree): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const d of UNIT_SEARCH_PATH) {
    let real: string | undefined;
    try {
      const r = tree.resolve(d, { followLast: true });
      if (r?.stat?.isDirectory()) real = r.rel;
    } catch {
      // a directory that cannot be resolved (a loop) holds no units
    }
    if (real === undefined || seen.has(real)) continue;
    seen.add(real);
    out.push(d);
  }
  return out;
}

/** The file names systemd tries for a unit: an instance falls back to its template. */
export function unitFileCandidates(name: string): string[] {
  const u = parseUnitName(name);
  return isInstance(u) ? [name, templateOf(u)] : [name];
}

/**
 * The tree path of the regular file systemd would load for `name` (first in the search
 * path, an instance falling back to its template; symlinks followed inside the tree),
 * or null when the tree has none. Masks are not looked at here.
 */
export function findUnitFile(tree: ReadOnlyTree, name: string, dirs: readonly string[] = UNIT_SEARCH_PATH): string | null {
  for (const file of unitFileCandidates(name)) {
    for (const d of dirs) {
      const p = `${d}/${file}`;
      try {
        if (tree.stat(p)?.isFile()) return p;
      } catch {
        // unresolvable: not a unit file
      }
    }
  }
  return null;
}

/** True when a directory of the search path holds a link from `name` to /dev/null (a mask). */
export function isMaskedIn(tree: ReadOnlyTree, name: string): boolean {
  return UNIT_SEARCH_PATH.some((d) => {
    try {
      const target = tree.readlink(`${d}/${name}`);
      // Offline, dev/ may be missing or empty: the link's text is what systemd looks at.
      return target !== null && (target === '/dev/null' || tree.resolve(`${d}/${name}`, { followLast: true })?.rel === 'dev/null');
    } catch {
      return false;
    }
  });
}
