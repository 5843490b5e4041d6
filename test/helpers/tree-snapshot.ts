import * as fs from 'node:fs';
import * as path from 'node:path';
import { readXattrs } from '../../src/fs/core/xattr.js';

/**
 * Every entry of a tree with what a reboot or an undo must give back exactly: its type,
 * mode, owner, extended attributes (security.selinux among them), a file's bytes and a
 * symlink's target. Not times: a directory's mtime changes whenever an entry in it does.
 */
export function snapshotTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (rel: string): void => {
    const host = rel === '' ? root : path.join(root, rel);
    const st = fs.lstatSync(host);
    const xattrs = readXattrs(host)
      .map(([n, v]) => `${n}=${v.toString('hex')}`)
      .join(',');
    const kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'other';
    const body = st.isFile() ? fs.readFileSync(host).toString('hex') : st.isSymbolicLink() ? fs.readlinkSync(host) : '';
    out[rel === '' ? '.' : rel] = `${kind} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} [${xattrs}] ${body}`;
    if (st.isDirectory()) for (const n of fs.readdirSync(host).sort()) visit(rel === '' ? n : `${rel}/${n}`);
  };
  visit('');
  return out;
}
