import * as fs from 'node:fs';
import * as path from 'node:path';
import { tool } from '../helpers/tools.js';

/** A minisign key pair made by the real tool (no password), in `dir`. */
export async function minisignKey(dir: string, name: string): Promise<{ pub: string; key: string; id: string }> {
  const pub = path.join(dir, `${name}.pub`);
  const key = path.join(dir, `${name}.key`);
  await tool('minisign', ['-G', '-W', '-p', pub, '-s', key]);
  const id = /minisign public key ([0-9A-F]{1,16})/.exec(fs.readFileSync(pub, 'utf8'))![1]!;
  return { pub, key, id };
}

/** Signs a file with the real minisign (prehashed by default, `legacy` for the old "Ed" format). */
export async function minisignSign(key: string, file: string, o: { comment?: string; legacy?: boolean; out?: string } = {}): Promise<string> {
  const out = o.out ?? `${file}.minisig`;
  await tool('minisign', ['-S', ...(o.legacy ? ['-l'] : []), '-s', key, '-m', file, '-x', out, ...(o.comment ? ['-t', o.comment] : [])]);
  return out;
}
