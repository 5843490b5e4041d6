import * as fs from 'node:fs';
import { bytesOfName, hasRawBytes } from './names.js';

/** fsyncs a directory, so that the entries created, renamed or removed in it are durable (a string path escapes a name that is not UTF-8; a Buffer is the bytes). */
export function fsyncDir(dir: string | Buffer): void {
  const fd = fs.openSync(typeof dir === 'string' && hasRawBytes(dir) ? bytesOfName(dir) : dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
