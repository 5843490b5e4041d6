import * as os from 'node:os';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { StagedrootError } from '../../errors.js';
import { listDirAsync, readSmallFile } from '../../fs/trees/fetch-file.js';
import { scopesOf } from './policy.js';
import type { ImageReference } from './reference.js';

/** containers-registries.d(5): where each registry's signatures are (`lookaside`, `use-sigstore-attachments`). */
export const REGISTRIES_D = '/etc/containers/registries.d';

/** containers/image's built-in lookaside for root (docker/registries_d.go `defaultDockerDir`). */
export const ROOT_LOOKASIDE = '/var/lib/containers/sigstore';

/**
 * The lookaside containers/image uses when no registries.d scope names one for an image
 * (docker/registries_d.go `builtinDefaultLookasideStorageDir`, for reading and for
 * writing alike: where `skopeo copy --sign-by` writes simple signatures with no
 * registries.d configuration, and where podman and skopeo read them): ROOT_LOOKASIDE for
 * root, `$HOME/.local/share/containers/sigstore` for any other user. The user is
 * containers/image's `rootless.GetRootlessEUID`: `_CONTAINERS_ROOTLESS_UID` when set
 * (podman's rootless user namespace, where the euid is 0 but the user is not root; a value
 * that is not a number is 0, as Go's Atoi leaves it), else the effective uid. A directory.
 */
export function builtinLookasideDir(env: NodeJS.ProcessEnv = process.env, euid: number = process.geteuid?.() ?? 0): string {
  const set = env._CONTAINERS_ROOTLESS_UID;
  const uid = set === undefined || set === '' ? euid : /^[+-]?[0-9]+$/.test(set) ? Number(set) : 0;
  return uid === 0 ? ROOT_LOOKASIDE : path.join(env.HOME || os.homedir(), '.local/share/containers/sigstore');
}

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

/** What registries.d says for one reference: each setting with the file it came from, null where no scope sets it. */
export interface RegistriesDConfig {
  /** The lookaside base URL (simple signing's signatures). */
  lookaside: { url: string; file: string } | null;
  /** Whether sigstore signatures are looked for as attachments in the registry (default false). */
  useSigstoreAttachments: RegistriesDSetting<boolean> | null;
}

/**
 * What registries.d says for a reference, as containers/image looks it up (one read of
 * the directory): each setting on its own, from the most specific `docker:` scope that
 * sets it (the repository, each parent namespace, the host, `*.DOMAIN`), else from
 * `default-docker`. As containers/image merges the directory (loadAndMergeConfig): only
 * `*.yaml` files are read (podman and skopeo ignore a `.yml`, so stagedroot must too),
 * and `default-docker` or a `docker:` scope defined in two files is an error naming both.
 * The reference is the endpoint's (a mirror's own name when a mirror serves), as
 * containers/image's client is made from the physical reference.
 */
export async function registriesDFor(ref: ImageReference, dir = REGISTRIES_D): Promise<RegistriesDConfig> {
  const keys = ['lookaside', 'useSigstoreAttachments'] as const;
  const scopes = { lookaside: new Map<string, ScopeConfig>(), useSigstoreAttachments: new Map<string, ScopeConfig>() };
  const fallback: Record<(typeof keys)[number], ScopeConfig | null> = { lookaside: null, useSigstoreAttachments: null };
  // Which file defined default-docker ('') and each docker scope: a second definition is refused.
  const definedIn = new Map<string, string>();
  const once = (scope: string, file: string, what: string): void => {
    const first = definedIn.get(scope);
    if (first !== undefined) throw new StagedrootError('SIGNATURE_INVALID', `${what} is defined both in ${first} and in ${file} (containers/image refuses this too): keep one`, { path: file });
    definedIn.set(scope, file);
  };
  for (const n of (await listDirAsync(dir)).filter((n) => n.endsWith('.yaml')).sort()) {
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
      once('', file, 'default-docker');
      const d = scopeConfig(doc['default-docker'], file);
      for (const k of keys) if (d[k] !== undefined && fallback[k] === null) fallback[k] = d;
    }
    for (const [scope, v] of Object.entries((doc.docker ?? {}) as Record<string, unknown>)) {
      once(`docker:${scope}`, file, `The docker scope ${JSON.stringify(scope)}`);
      const c = scopeConfig(v, file);
      for (const k of keys) if (c[k] !== undefined && !scopes[k].has(scope)) scopes[k].set(scope, c);
    }
  }
  const pick = (k: (typeof keys)[number]): ScopeConfig | null => scopesOf(ref).slice(1, -1).map((s) => scopes[k].get(s)).find((c) => c !== undefined) ?? fallback[k];
  const l = pick('lookaside');
  const u = pick('useSigstoreAttachments');
  return { lookaside: l && { url: l.lookaside!, file: l.file }, useSigstoreAttachments: u && { value: u.useSigstoreAttachments!, file: u.file } };
}
