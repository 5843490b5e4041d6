/**
 * systemd unit names (systemd.unit(5)): "prefix[@instance].suffix". Names come from the
 * config and from unit files' [Install] sections, and each becomes a path component, so
 * they are checked here: no "/", no "..", a known suffix, systemd's character set.
 * Backslash escapes (\x2d) are legal in systemd but refused here: the safe-fs layer
 * refuses backslashes in paths.
 */
export const UNIT_SUFFIXES = ['service', 'socket', 'device', 'mount', 'automount', 'swap', 'target', 'path', 'timer', 'slice', 'scope'] as const;

const NAME = new RegExp(`^[A-Za-z0-9:_.@-]+\\.(${UNIT_SUFFIXES.join('|')})$`);
const MAX_NAME = 255;

/** Why `name` is not an acceptable unit name, or null when it is. */
export function unitNameProblem(name: string): string | null {
  if (name.includes('/')) return 'a unit name must not contain "/"';
  if (name.includes('..')) return 'a unit name must not contain ".."';
  if (name.includes('\\')) return 'unit names with backslash escapes are not supported';
  if (name.length > MAX_NAME) return `a unit name must be at most ${MAX_NAME} characters`;
  if (!NAME.test(name)) return `not a unit name: it must be made of [A-Za-z0-9:_.@-] and end in a unit type (.${UNIT_SUFFIXES.join(', .')})`;
  const at = name.indexOf('@');
  if (at === 0 || (at >= 0 && name.indexOf('@', at + 1) >= 0)) return 'a unit name has at most one "@", after a non-empty prefix';
  return null;
}

/** Why `name` is not an acceptable drop-in file name, or null when it is. */
export function dropinNameProblem(name: string): string | null {
  if (name.includes('/')) return 'a drop-in name must not contain "/"';
  if (name.includes('\\') || name.includes('\0')) return 'a drop-in name must not contain backslashes or NUL bytes';
  if (name === '.conf' || name.startsWith('..') || !name.endsWith('.conf')) return 'a drop-in name must end in ".conf" and not start with ".."';
  return null;
}

export interface UnitName {
  name: string;
  /** "foo" for foo@bar.service and foo.service. */
  prefix: string;
  /** "bar" for foo@bar.service, "" for the template foo@.service, null for foo.service. */
  instance: string | null;
  suffix: string;
}

export function parseUnitName(name: string): UnitName {
  const dot = name.lastIndexOf('.');
  const stem = name.slice(0, dot);
  const suffix = name.slice(dot + 1);
  const at = stem.indexOf('@');
  if (at < 0) return { name, prefix: stem, instance: null, suffix };
  return { name, prefix: stem.slice(0, at), instance: stem.slice(at + 1), suffix };
}

export const isTemplate = (u: UnitName): boolean => u.instance === '';
export const isInstance = (u: UnitName): boolean => u.instance !== null && u.instance !== '';

/** foo@.service for foo@bar.service. */
export function templateOf(u: UnitName): string {
  return `${u.prefix}@.${u.suffix}`;
}

/** The template a unit name is an instance of (foo@a.b.service → foo@.service), or the name itself. */
export function templateNameOf(name: string): string {
  const u = parseUnitName(name);
  return isInstance(u) ? templateOf(u) : name;
}

/** foo@bar.service from the template foo@.service and "bar". */
export function withInstance(template: UnitName, instance: string): string {
  return `${template.prefix}@${instance}.${template.suffix}`;
}

/**
 * Expands the specifiers [Install] values may use (systemd.unit(5) "Specifiers") that
 * are well defined offline; host-dependent ones (%H, %m, %b, ...) make the value an error.
 */
export function expandSpecifiers(value: string, u: UnitName): string {
  return value.replace(/%(.)?/g, (m, c: string | undefined) => {
    switch (c) {
      case '%':
        return '%';
      case 'n':
        return u.name;
      case 'N':
        return u.name.slice(0, u.name.lastIndexOf('.'));
      case 'p':
        return u.prefix;
      case 'i':
        return u.instance ?? '';
      case 'j': {
        const dash = u.prefix.lastIndexOf('-');
        return dash < 0 ? u.prefix : u.prefix.slice(dash + 1);
      }
      default:
        throw new Error(`the specifier ${m} is not supported offline (only %n %N %p %i %j %%)`);
    }
  });
}
