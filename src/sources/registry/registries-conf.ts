import * as path from 'node:path';
import { parse } from 'smol-toml';
import { StagedrootError } from '../../errors.js';
import { listDirAsync, readSmallFile } from '../../fs/trees/fetch-file.js';
import { parsePullspec, type ImageReference } from './reference.js';

/** containers-registries.conf(5): the file podman, skopeo, CRI-O and the MCO's rendered configs share. */
export const REGISTRIES_CONF = '/etc/containers/registries.conf';
/** Its drop-ins, read after it in name order (`*.conf`). */
export const REGISTRIES_CONF_DIR = '/etc/containers/registries.conf.d';

const MAX_CONF = 4 * 1024 * 1024;

export type PullFromMirror = 'all' | 'digest-only' | 'tag-only';

export interface MirrorEntry {
  location: string;
  insecure: boolean;
  pullFromMirror: PullFromMirror;
}

export interface RegistryEntry {
  /** What a reference's name must start with (`quay.io/org`, `*.example.com`); the location when not given. */
  prefix: string;
  /** Where the prefix's images are (the prefix replaced by it); empty with a wildcard prefix. */
  location: string;
  insecure: boolean;
  blocked: boolean;
  mirrors: MirrorEntry[];
  /** The file that said it, for messages. */
  file: string;
}

export interface RegistriesConf {
  registries: RegistryEntry[];
  /** The files read, in order. */
  files: string[];
}

/** One place to pull an image from: a mirror or the source, the reference rewritten for it. */
export interface Endpoint {
  ref: ImageReference;
  insecure: boolean;
  /** A mirror (else the source's own location). */
  mirror: boolean;
}

const PULL_FROM = new Set<PullFromMirror>(['all', 'digest-only', 'tag-only']);

function bad(file: string, why: string): never {
  throw new StagedrootError('REGISTRY_FAILED', `${file}: ${why}`, { path: file });
}

/** One registries.conf (v2: `[[registry]]` tables) read into entries; v1's `[registries.search]` form is refused. */
export function parseRegistriesConf(text: string, file: string): RegistryEntry[] {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    return bad(file, `not TOML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc.registries !== undefined) bad(file, 'a version 1 registries.conf ([registries.search] and the like); write [[registry]] tables (version 2)');
  const list = doc.registry;
  if (list === undefined) return [];
  if (!Array.isArray(list)) bad(file, '`registry` must be an array of tables ([[registry]])');
  return list.map((r, i): RegistryEntry => {
    const where = `[[registry]] #${i + 1}`;
    if (r === null || typeof r !== 'object' || Array.isArray(r)) bad(file, `${where} is not a table`);
    const t = r as Record<string, unknown>;
    const str = (k: string, v: unknown = t[k]): string => {
      if (v === undefined) return '';
      if (typeof v !== 'string') bad(file, `${where}: ${k} must be a string`);
      return v as string;
    };
    const bool = (k: string, v: unknown = t[k]): boolean => {
      if (v === undefined) return false;
      if (typeof v !== 'boolean') bad(file, `${where}: ${k} must be true or false`);
      return v as boolean;
    };
    const location = str('location').replace(/\/$/, '');
    const prefix = (str('prefix') || location).replace(/\/$/, '');
    if (prefix === '') bad(file, `${where} has neither prefix nor location`);
    if (prefix.startsWith('*.') && location !== '') bad(file, `${where}: a wildcard prefix (${prefix}) takes no location`);
    const byDigestOnly = bool('mirror-by-digest-only');
    const mirrorList = t.mirror ?? [];
    if (!Array.isArray(mirrorList)) bad(file, `${where}: mirror must be an array of tables ([[registry.mirror]])`);
    const mirrors = mirrorList.map((m, j): MirrorEntry => {
      const mw = `${where}, mirror #${j + 1}`;
      if (m === null || typeof m !== 'object' || Array.isArray(m)) bad(file, `${mw} is not a table`);
      const mt = m as Record<string, unknown>;
      const loc = str('location', mt.location).replace(/\/$/, '');
      if (loc === '') bad(file, `${mw} has no location`);
      const pf = str('pull-from-mirror', mt['pull-from-mirror']);
      if (pf !== '' && !PULL_FROM.has(pf as PullFromMirror)) bad(file, `${mw}: pull-from-mirror must be all, digest-only or tag-only, not ${JSON.stringify(pf)}`);
      // mirror-by-digest-only on the registry is digest-only for each of its mirrors that says nothing else.
      return { location: loc, insecure: bool('insecure', mt.insecure), pullFromMirror: (pf || (byDigestOnly ? 'digest-only' : 'all')) as PullFromMirror };
    });
    return { prefix, location, insecure: bool('insecure'), blocked: bool('blocked'), mirrors, file };
  });
}

/**
 * The registries configuration: `file` alone when given (`--registries-conf`), else
 * /etc/containers/registries.conf and then its drop-ins. A later `[[registry]]` with the
 * same prefix replaces an earlier one, as containers/image merges them.
 */
export async function loadRegistriesConf(o: { file?: string; mainFile?: string; dropInDir?: string } = {}): Promise<RegistriesConf> {
  const files: string[] = [];
  if (o.file !== undefined) files.push(o.file);
  else {
    files.push(o.mainFile ?? REGISTRIES_CONF);
    const dir = o.dropInDir ?? REGISTRIES_CONF_DIR;
    for (const n of (await listDirAsync(dir)).filter((n) => n.endsWith('.conf')).sort()) files.push(path.join(dir, n));
  }
  const byPrefix = new Map<string, RegistryEntry>();
  const read: string[] = [];
  for (const f of files) {
    const bytes = await readSmallFile(f, MAX_CONF);
    if (bytes === null) {
      if (f === o.file) throw new StagedrootError('USAGE', `The registries configuration ${f} does not exist (or is over 4 MiB)`, { option: 'registriesConf', value: f });
      continue;
    }
    read.push(f);
    for (const r of parseRegistriesConf(bytes.toString('utf8'), f)) {
      byPrefix.delete(r.prefix); // re-inserted last: a drop-in's entry is its own
      byPrefix.set(r.prefix, r);
    }
  }
  return { registries: [...byPrefix.values()], files: read };
}

/** `registry/repository` of a reference: what prefixes are matched against. */
function nameOf(r: ImageReference): string {
  return `${r.registry}/${r.repository}`;
}

/** Whether `prefix` matches the name: the same, or a path below it; `*.example.com` any host under example.com. */
function matches(prefix: string, name: string): boolean {
  if (prefix.startsWith('*.')) {
    const host = name.slice(0, name.indexOf('/'));
    return host.endsWith(prefix.slice(1)) && host.length > prefix.length - 1;
  }
  return name === prefix || name.startsWith(`${prefix}/`);
}

/** The entry for a reference: the longest matching prefix (a plain one before a wildcard, as containers/image). */
export function registryFor(conf: RegistriesConf, ref: ImageReference): RegistryEntry | null {
  const name = nameOf(ref);
  let best: RegistryEntry | null = null;
  const rank = (e: RegistryEntry) => (e.prefix.startsWith('*.') ? 0 : 1_000_000) + e.prefix.length;
  for (const e of conf.registries) if (matches(e.prefix, name) && (best === null || rank(e) > rank(best))) best = e;
  return best;
}

/** The reference at a location: the matched prefix replaced (a wildcard's host part). */
function rewrite(ref: ImageReference, e: RegistryEntry, location: string): ImageReference {
  const name = nameOf(ref);
  const matched = e.prefix.startsWith('*.') ? name.slice(0, name.indexOf('/')) : e.prefix;
  const moved = location + name.slice(matched.length);
  const spec = moved + (ref.digest !== undefined ? `@${ref.digest}` : `:${ref.tag ?? 'latest'}`);
  const r = parsePullspec(spec, { code: 'REGISTRY_FAILED', what: `The image at ${location} (${e.file})` });
  return { ...r, input: ref.input };
}

/**
 * Where to pull `ref` from, in order: each mirror its pull-from-mirror allows for this
 * reference (`digest-only`: only a reference by digest; `tag-only`: only by tag), then
 * the source's own location. A blocked registry is refused.
 */
export function endpointsFor(conf: RegistriesConf | null, ref: ImageReference): Endpoint[] {
  const e = conf === null ? null : registryFor(conf, ref);
  if (e === null) return [{ ref, insecure: false, mirror: false }];
  if (e.blocked) throw new StagedrootError('REGISTRY_FAILED', `${nameOf(ref)}: the registry ${e.prefix} is blocked (blocked = true in ${e.file})`, { path: e.file });
  const byDigest = ref.digest !== undefined;
  const out: Endpoint[] = [];
  for (const m of e.mirrors) {
    if ((m.pullFromMirror === 'digest-only' && !byDigest) || (m.pullFromMirror === 'tag-only' && byDigest)) continue;
    out.push({ ref: rewrite(ref, e, m.location), insecure: m.insecure, mirror: true });
  }
  out.push({ ref: e.location === '' ? ref : rewrite(ref, e, e.location), insecure: e.insecure, mirror: false });
  return out;
}
