import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { StagedrootError } from '../../errors.js';
import { listDirAsync, readSmallFile } from '../../fs/trees/fetch-file.js';
import { scopesOf } from './policy.js';
import type { ImageReference } from './reference.js';

/** containers-registries.d(5): where each registry's signatures are (`lookaside`, `use-sigstore-attachments`). */
export const REGISTRIES_D = '/etc/containers/registries.d';

/** What one scope of a registries.d file says (each field only when it says it), and the file. */
interface ScopeConfig {
  lookaside?: string;
  useSigstoreAttachments?: boolean;
  file: string;
}

/** A setting for a reference, and the file it came from. */
export interface RegistriesDSetting<T> {
  value: T;
  file: string;
}

function scopeConfig(v: unknown, file: string): ScopeConfig {
  const o = (v ?? {}) as Record<string, unknown>;
  const u = o.lookaside ?? o.sigstore; // `sigstore` is the older name of `lookaside`
  const s = o['use-sigstore-attachments'];
  if (s !== undefined && typeof s !== 'boolean') throw new StagedrootError('SIGNATURE_INVALID', `${file}: use-sigstore-attachments is ${JSON.stringify(s)}, not true or false`, { path: file });
  return { file, ...(typeof u === 'string' ? { lookaside: u } : {}), ...(s !== undefined ? { useSigstoreAttachments: s } : {}) };
}

/**
 * A setting for a reference as containers/image looks it up: each field on its own, from
 * the most specific `docker:` scope that sets it (the repository, each parent namespace,
 * the host, `*.DOMAIN`), else from `default-docker`; the files read in name order, the
 * first file to name a scope holding it.
 */
async function settingFor<K extends 'lookaside' | 'useSigstoreAttachments'>(ref: ImageReference, key: K, dir: string): Promise<RegistriesDSetting<NonNullable<ScopeConfig[K]>> | null> {
  const scopes = new Map<string, ScopeConfig>();
  let fallback: ScopeConfig | null = null;
  for (const n of (await listDirAsync(dir)).filter((n) => n.endsWith('.yaml') || n.endsWith('.yml')).sort()) {
    const file = path.join(dir, n);
    const bytes = await readSmallFile(file, 1024 * 1024);
    if (bytes === null) continue;
    let doc: Record<string, unknown>;
    try {
      doc = (parseYaml(bytes.toString('utf8')) ?? {}) as Record<string, unknown>;
    } catch (err) {
      throw new StagedrootError('SIGNATURE_INVALID', `${file}: not YAML: ${(err as Error).message.split('\n')[0]}`, { path: file });
    }
    if (doc['default-docker'] !== undefined) {
      const d = scopeConfig(doc['default-docker'], file);
      if (d[key] !== undefined && fallback === null) fallback = d;
    }
    for (const [scope, v] of Object.entries((doc.docker ?? {}) as Record<string, unknown>)) {
      const c = scopeConfig(v, file);
      if (c[key] !== undefined && !scopes.has(scope)) scopes.set(scope, c);
    }
  }
  for (const s of scopesOf(ref).slice(1, -1)) {
    const hit = scopes.get(s);
    if (hit) return { value: hit[key]!, file: hit.file };
  }
  return fallback ? { value: fallback[key]!, file: fallback.file } : null;
}

/** The lookaside base URL for a reference (simple signing's signatures), or null. */
export async function lookasideFor(ref: ImageReference, dir = REGISTRIES_D): Promise<{ url: string; file: string } | null> {
  const s = await settingFor(ref, 'lookaside', dir);
  return s && { url: s.value, file: s.file };
}

/** Whether a reference's sigstore signatures are looked for as attachments in its registry (`use-sigstore-attachments`, default false). */
export async function sigstoreAttachmentsFor(ref: ImageReference, dir = REGISTRIES_D): Promise<RegistriesDSetting<boolean> | null> {
  return settingFor(ref, 'useSigstoreAttachments', dir);
}
