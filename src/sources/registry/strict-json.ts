/** JSON as containers/image's strict parse reads it (internal.ParanoidUnmarshalJSONObject): a key an object repeats is an error, where JSON.parse keeps the last. */

/** A key repeated in an object, and the keys leading to that object (`[]` for an array's element). */
export interface DuplicateKey {
  path: string[];
  key: string;
}

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * The first key an object of `text` repeats (keys compared decoded, as Go's decoder
 * compares them), among the objects `checked` says are checked (by the keys leading to
 * them); null when none does. `text` must be valid JSON (JSON.parse it first): the scan
 * only tells keys from values by the `:` after them.
 */
export function duplicateKey(text: string, checked: (path: string[]) => boolean = () => true): DuplicateKey | null {
  // Each open object or array: its keys seen (null: an array, or an object not checked) and its path.
  const stack: { object: boolean; keys: Set<string> | null; path: string[] }[] = [];
  let lastKey = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      while (text.charCodeAt(j) !== 0x22) j += text.charCodeAt(j) === 0x5c /* \ */ ? 2 : 1;
      let k = j + 1;
      while (isSpace(text.charCodeAt(k))) k++;
      if (text.charCodeAt(k) === 0x3a /* : */) {
        lastKey = JSON.parse(text.slice(i, j + 1)) as string;
        const top = stack.at(-1)!;
        if (top.keys?.has(lastKey)) return { path: top.path, key: lastKey };
        top.keys?.add(lastKey);
        k++;
      }
      i = k - 1;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const top = stack.at(-1);
      const path = top === undefined ? [] : [...top.path, top.object ? lastKey : '[]'];
      stack.push({ object: c === 0x7b, keys: c === 0x7b && checked(path) ? new Set() : null, path });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) stack.pop();
  }
  return null;
}

/** Where a duplicate key is, for a message: `"KEY" twice` and, below the top level, ` in A.B`. */
export function describeDuplicate(d: DuplicateKey): string {
  return `the key ${JSON.stringify(d.key)} twice${d.path.length > 0 ? ` in ${d.path.join('.')}` : ''}`;
}
