import { parse } from 'smol-toml';

/** What the MCO reads of a registries.conf (v2) to judge a change (sysregistriesv2's fields). */
interface Mirror {
  location: string;
  insecure: boolean;
  pullFromMirror: string;
}
interface Registry {
  prefix: string;
  location: string;
  insecure: boolean;
  blocked: boolean;
  mirrorByDigestOnly: boolean;
  mirrors: Mirror[];
}
interface Conf {
  search: string[];
  registries: Registry[];
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const bool = (v: unknown): boolean => v === true;
const table = (v: unknown): Record<string, unknown> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function readConf(text: string | null): Conf {
  if (text === null) return { search: [], registries: [] };
  const doc = parse(text);
  return {
    search: list(doc['unqualified-search-registries']).map(str),
    registries: list(doc.registry).map((r) => {
      const t = table(r);
      return {
        prefix: str(t.prefix),
        location: str(t.location),
        insecure: bool(t.insecure),
        blocked: bool(t.blocked),
        mirrorByDigestOnly: bool(t['mirror-by-digest-only']),
        mirrors: list(t.mirror).map((m) => {
          const mt = table(m);
          return { location: str(mt.location), insecure: bool(mt.insecure), pullFromMirror: str(mt['pull-from-mirror']) };
        }),
      };
    }),
  };
}

const scopeOf = (r: Registry): string => r.prefix || r.location;
const DIGEST_ONLY = 'digest-only';

function allDigestOnly(r: Registry): boolean {
  return r.mirrors.length === 0 ? r.mirrorByDigestOnly : r.mirrors.every((m) => m.pullFromMirror === DIGEST_ONLY);
}

/** Why a change of /etc/containers/registries.conf needs a drain, or null when the MCO deems it safe. */
export function registriesConfDrainReason(before: string | null, after: string | null): string | null {
  let a: Conf;
  let b: Conf;
  try {
    a = readConf(before);
    b = readConf(after);
  } catch (err) {
    return `it does not parse as TOML (${(err as Error).message})`;
  }
  // isSafeContainerRegistryConfChanges (pkg/daemon/drain.go), check by check.
  if (a.search.length > b.search.length) return 'an unqualified-search-registries entry was removed';
  for (let i = 0; i < a.search.length; i++) if (b.search[i] !== a.search[i]) return `unqualified-search-registries changed at ${a.search[i]} (the order of lookups matters)`;
  const old = new Map(a.registries.map((r) => [scopeOf(r), r]));
  const next = new Map(b.registries.map((r) => [scopeOf(r), r]));
  for (const scope of old.keys()) if (!next.has(scope)) return `registry ${scope} was removed`;
  for (const [scope, n] of next) {
    const o = old.get(scope);
    if (o === undefined) {
      if (!allDigestOnly(n)) return `registry ${scope} was added with a mirror that is not pull-from-mirror = "digest-only"`;
      continue;
    }
    if (JSON.stringify(o) === JSON.stringify(n)) continue;
    for (const k of ['prefix', 'location', 'blocked', 'insecure'] as const) if (o[k] !== n[k]) return `${k} of registry ${scope} changed`;
    for (const m of o.mirrors) if (!n.mirrors.some((x) => x.location === m.location)) return `mirror ${m.location} of registry ${scope} was removed`;
    for (const m of n.mirrors) {
      const was = o.mirrors.find((x) => x.location === m.location);
      if (was !== undefined && m.pullFromMirror !== was.pullFromMirror && m.pullFromMirror !== DIGEST_ONLY) return `pull-from-mirror of mirror ${m.location} changed to "${m.pullFromMirror}"`;
      if (was === undefined && m.pullFromMirror !== DIGEST_ONLY && !n.mirrorByDigestOnly) return `mirror ${m.location} was added to registry ${scope} without pull-from-mirror = "digest-only"`;
    }
  }
  return null;
}
