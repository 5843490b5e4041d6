import * as fs from 'node:fs';
import { bytesOfName, hasRawBytes } from './names.js';

/** fsyncs a directory, so that the entries created, renamed or removed in it are durable. */
export function fsyncDir(dir: string): void {
  const fd = fs.openSync(hasRawBytes(dir) ? bytesOfName(dir) : dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
