/**
 * The [Install] section of a unit file (systemd.unit(5)), the part `systemctl enable`
 * reads: which `.wants/`, `.requires/`, `.upholds/` directories get a link, which alias
 * links exist, which other units are enabled along. Only the unit file itself is read,
 * as systemctl does (drop-ins do not carry [Install]).
 */
export interface InstallInfo {
  wantedBy: string[];
  requiredBy: string[];
  upheldBy: string[];
  alias: string[];
  also: string[];
  defaultInstance: string | null;
}

const LIST_KEYS = { WantedBy: 'wantedBy', RequiredBy: 'requiredBy', UpheldBy: 'upheldBy', Alias: 'alias', Also: 'also' } as const;

export function parseInstall(text: string): InstallInfo {
  const info: InstallInfo = { wantedBy: [], requiredBy: [], upheldBy: [], alias: [], also: [], defaultInstance: null };
  let section = '';
  for (const line of logicalLines(text)) {
    if (line.startsWith('[')) {
      section = line.endsWith(']') ? line.slice(1, -1) : '';
      continue;
    }
    if (section !== 'Install') continue;
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim();
    if (key === 'DefaultInstance') {
      info.defaultInstance = value === '' ? null : value;
    } else if (key in LIST_KEYS) {
      const field = LIST_KEYS[key as keyof typeof LIST_KEYS];
      // An empty assignment resets the list, as for every systemd list setting.
      info[field] = value === '' ? [] : [...info[field], ...words(value)];
    }
  }
  return info;
}

export function hasInstallInfo(i: InstallInfo): boolean {
  return i.wantedBy.length + i.requiredBy.length + i.upheldBy.length + i.alias.length + i.also.length > 0;
}

/** Trimmed lines with comments dropped and backslash continuations joined (by a space, as systemd does). */
function* logicalLines(text: string): Generator<string> {
  let pending = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (pending === '' && (line.startsWith('#') || line.startsWith(';'))) continue;
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    if (full !== '') yield full;
  }
  if (pending.trim() !== '') yield pending.trim();
}

/** Whitespace-separated words; double or single quotes group a word. */
function words(value: string): string[] {
  const out: string[] = [];
  for (const m of value.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out.filter((w) => w !== '');
}
