import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ioError } from './io-error.js';

/**
 * A private temporary directory outside every sysroot, for tools that need a root of
 * their own (e.g. systemd-analyze checking a drop-in whose unit the tree does not ship).
 * Never used for anything that must survive a crash.
 */
export class ScratchDir {
  readonly path: string;

  constructor(prefix = 'stagedroot-scratch-') {
    this.path = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  }

  /** Writes `data` at `rel` (parents created). */
  write(rel: string, data: string | Uint8Array): string {
    const p = path.join(this.path, rel);
    try {
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, data, { mode: 0o644 });
    } catch (err) {
      throw ioError(err, rel, p, 'sysroot');
    }
    return p;
  }

  remove(): void {
    fs.rmSync(this.path, { recursive: true, force: true });
  }
}
