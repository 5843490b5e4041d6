import { comparePaths } from '../core/paths.js';
import { cheapPath, parseManifestLine, type ManifestEntry } from './manifest-line.js';
import { TextCache } from './text-cache.js';
import { dropsOf, overlayFile, overlayHead, overlayOfText, overlayUnreadable, parsedOverlay, readOverlayText, viewOf, type OverlayView } from './manifest-overlay.js';

/**
 * A manifest's overlay as ManifestIndex looks paths up in it, without parsing every line:
 * a stage's overlay names all of etc/ (every copied entry), a live apply looks up a few
 * paths in it, and the parse of each line (JSON and the entry's check) was most of the
 * lookups' cost (the guest's profile of apply-live: 126 of 186 ms). What parseOverlay
 * checks of the whole file is checked here too, from each line's path read without a
 * parse (cheapPath): the header, the newline at the end, the paths in order, each one
 * dirty. A line is parsed (and its entry checked, its path the one read) when it is looked
 * up, as ManifestIndex parses the base file's lines its search reads and no other. A line
 * whose path cannot be read without a parse (escapes in it), or a whole parse of the same
 * text made already by another reader, and the whole parse is used.
 */
export interface OverlayLookup {
  /** The overlay's entry of `p` (undefined: it names none). */
  find(p: string): ManifestEntry | undefined;
  /** True for a base line the overlay replaces or removes. */
  drops(p: string): boolean;
  /** The paths of the overlay's entries, in order (each one's entry is find's, parsed when looked up). */
  paths(): readonly string[];
  /** The whole overlay as the other readers apply it (parsed now if it was not). */
  view(): OverlayView;
}

/** The lookup made for each file's last text read (as readOverlay keeps its parses): one live apply opens the same overlays several times. */
const made = new TextCache<OverlayLookup>(8);

/** The overlay of `manifest` for lookups, or null when it has none. */
export function overlayLookupOf(manifest: string): OverlayLookup | null {
  const text = readOverlayText(manifest);
  return text === null ? null : made.get(manifest, text, (t) => lookupOf(manifest, t));
}

function lookupOf(manifest: string, text: string): OverlayLookup {
  const whole = (): OverlayLookup => {
    const v = viewOf(overlayOfText(manifest, text));
    return { find: (p) => v.byPath.get(p), drops: v.drops, paths: () => v.entries.map((e) => e.p), view: () => v };
  };
  if (parsedOverlay(manifest, text) !== null) return whole();
  const file = overlayFile(manifest);
  const { lines, dirty, removed } = overlayHead(text, file);
  const at = new Map<string, number>();
  let last: string | null = null;
  for (let i = 1; i < lines.length - 1; i++) {
    const p = cheapPath(lines[i]!);
    if (p === null) return whole();
    if (last !== null && comparePaths(last, p) >= 0) throw overlayUnreadable(file, `line ${i + 1} is out of order`);
    if (!dirty.has(p)) throw overlayUnreadable(file, `line ${i + 1} (${p}) is not one of its dirty paths`);
    at.set(p, i);
    last = p;
  }
  const found = new Map<string, ManifestEntry>();
  return {
    find(p) {
      const i = at.get(p);
      if (i === undefined) return undefined;
      let e = found.get(p);
      if (e === undefined) {
        e = parseManifestLine(lines[i]!, file, `line ${i + 1}`);
        if (e.p !== p) throw overlayUnreadable(file, `line ${i + 1} names ${e.p}, not ${p}`);
        found.set(p, e);
      }
      return e;
    },
    drops: dropsOf(dirty, removed),
    paths: () => [...at.keys()],
    view: () => viewOf(overlayOfText(manifest, text)),
  };
}
