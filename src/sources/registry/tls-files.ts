import * as path from 'node:path';
import { rootCertificates } from 'node:tls';
import { StagedrootError } from '../../errors.js';
import { listDirAsync, readSmallFile } from '../../fs/trees/fetch-file.js';

/** The directory podman, skopeo and CRI-O share: HOST[:PORT]/*.crt (CAs), *.cert + *.key (a client certificate). */
export const CERTS_DIR = '/etc/containers/certs.d';
/** Debian's bundle of the system's CAs (update-ca-certificates). */
export const SYSTEM_CA_FILE = '/etc/ssl/certs/ca-certificates.crt';

const MAX_PEM = 4 * 1024 * 1024;

export interface TlsMaterial {
  /** The CAs a registry's certificate is verified against: the system's plus the registry's own. */
  ca: Buffer[] | string[];
  cert?: Buffer;
  key?: Buffer;
  /** The files used, for messages (never their content). */
  files: string[];
}

export interface TlsOptions {
  /** Default CERTS_DIR (the tests give their own). */
  certsDir?: string;
  /** Default SYSTEM_CA_FILE; Node's bundled roots when it does not exist. */
  systemCaFile?: string;
}

/** The TLS material for a registry at `hostPort` (as written in the reference: "quay.io", "localhost:5000"). */
export async function tlsFor(hostPort: string, o: TlsOptions = {}): Promise<TlsMaterial> {
  const systemFile = o.systemCaFile ?? SYSTEM_CA_FILE;
  const system = await readSmallFile(systemFile, MAX_PEM);
  const ca: (Buffer | string)[] = system !== null ? [system] : [...rootCertificates];
  const files = system !== null ? [systemFile] : [];
  const dir = path.join(o.certsDir ?? CERTS_DIR, hostPort);
  const names = await listDirAsync(dir);
  let cert: Buffer | undefined;
  let key: Buffer | undefined;
  for (const n of names) {
    const p = path.join(dir, n);
    if (n.endsWith('.crt')) {
      const b = await readSmallFile(p, MAX_PEM);
      if (b !== null) {
        ca.push(b);
        files.push(p);
      }
    } else if (n.endsWith('.cert')) {
      const keyPath = path.join(dir, `${n.slice(0, -'.cert'.length)}.key`);
      if (!names.includes(path.basename(keyPath))) throw new StagedrootError('REGISTRY_FAILED', `${p}: a client certificate without its key ${keyPath}`, { path: p });
      if (cert !== undefined) throw new StagedrootError('REGISTRY_FAILED', `${dir} holds more than one client certificate (*.cert); keep one`, { path: dir });
      cert = (await readSmallFile(p, MAX_PEM)) ?? undefined;
      key = (await readSmallFile(keyPath, MAX_PEM)) ?? undefined;
      files.push(p, keyPath);
    } else if (n.endsWith('.key')) {
      if (!names.includes(`${n.slice(0, -'.key'.length)}.cert`)) throw new StagedrootError('REGISTRY_FAILED', `${p}: a client key without its certificate (.cert)`, { path: p });
    }
  }
  return { ca: ca as Buffer[], ...(cert ? { cert } : {}), ...(key ? { key } : {}), files };
}
