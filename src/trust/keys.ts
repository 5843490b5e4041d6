import * as path from 'node:path';
import { StagedrootError } from '../errors.js';
import { type DurableFs } from '../fs/trees/durable.js';
import { listDir, readBytes } from '../fs/core/host-paths.js';
import type { Layout } from '../state/layout.js';
import { parsePublicKey, type PublicKey } from './minisign.js';

/** A key file is two short lines; anything bigger is not a key. */
const MAX_KEY_BYTES = 4096;
const KEY_FILE = /^([0-9A-F]{1,16})\.pub$/;

/** The sysroot's trusted keys (trusted-keys/KEYID.pub). None: sources need no signature. */
export function loadTrustedKeys(layout: Layout): PublicKey[] {
  const dir = layout.trustedKeysDir;
  const keys: PublicKey[] = [];
  for (const name of listDir(dir)) {
    const m = KEY_FILE.exec(name);
    if (!m) continue;
    const file = path.join(dir, name);
    const key = parsePublicKey(readBytes(file, MAX_KEY_BYTES)?.toString('utf8') ?? '', file);
    if (key.keyId !== m[1]) throw new StagedrootError('STATE_CORRUPT', `The trusted key ${file} holds key ${key.keyId}, not ${m[1]}`, { path: file });
    keys.push(key);
  }
  return keys;
}

/** Reads a minisign/signify public key file (or a bare `minisign -P` base64 line). */
export function readPublicKeyFile(file: string): PublicKey {
  const bytes = readBytes(file, MAX_KEY_BYTES);
  if (bytes === null) throw new StagedrootError('USAGE', `The key file ${file} does not exist`, { option: 'trusted-key', value: file });
  try {
    return parsePublicKey(bytes.toString('utf8'), file);
  } catch (err) {
    throw new StagedrootError('USAGE', (err as Error).message, { option: 'trusted-key', value: file, cause: err });
  }
}

/** Adds a trusted key (durably; adding a key already trusted changes nothing). */
export function addTrustedKey(ctx: { layout: Layout; dfs: DurableFs }, key: PublicKey): { keyId: string; added: boolean } {
  const { layout, dfs } = ctx;
  if (loadTrustedKeys(layout).some((k) => k.keyId === key.keyId)) return { keyId: key.keyId, added: false };
  dfs.mkdir(layout.trustedKeysDir);
  dfs.writeFileAtomic(path.join(layout.trustedKeysDir, `${key.keyId}.pub`), `untrusted comment: minisign public key ${key.keyId}\n${key.line}\n`);
  return { keyId: key.keyId, added: true };
}

/** Removes a trusted key by id (as minisign prints it); an unknown id is NOT_FOUND. */
export function removeTrustedKey(ctx: { layout: Layout; dfs: DurableFs }, keyId: string): { keyId: string } {
  const id = keyId.trim().toUpperCase().replace(/^0+(?=.)/, '');
  const { layout, dfs } = ctx;
  if (!loadTrustedKeys(layout).some((k) => k.keyId === id)) {
    throw new StagedrootError('NOT_FOUND', `No trusted key ${JSON.stringify(keyId)} in this sysroot`, { value: keyId });
  }
  dfs.unlink(path.join(layout.trustedKeysDir, `${id}.pub`));
  return { keyId: id };
}
