import * as fs from 'node:fs';

export interface WalkVisitor {
  /** Called for every entry below the root in depth-first order with sorted children. */
  enter(rel: string, host: string, st: fs.Stats): void;
  /** Called after a directory's children. */
  leave?(rel: string, host: string, st: fs.Stats): void;
}

/**
 * Walks a tree synchronously (sync calls in a tight loop beat thousands of promises),
 * never following symlinks, visiting children in sorted order so that the visit order
 * equals the manifest order.
 */
export function walkTree(root: string, visitor: WalkVisitor): void {
  const recurse = (relDir: string, hostDir: string): void => {
    const names = fs.readdirSync(hostDir).sort();
    for (const name of names) {
      const rel = relDir === '' ? name : relDir + '/' + name;
      const host = hostDir + '/' + name;
      const st = fs.lstatSync(host);
      visitor.enter(rel, host, st);
      if (st.isDirectory()) {
        recurse(rel, host);
        visitor.leave?.(rel, host, st);
      }
    }
  };
  recurse('', root);
}
