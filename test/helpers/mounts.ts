import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execaSync } from 'execa';

/**
 * Why a tmpfs cannot be mounted here, or null when it can (probed with a real 1 MiB
 * mount). Tests that need one skip with this reason printed, never silently.
 */
export function whyNoTmpfs(): string | null {
  if (process.getuid?.() !== 0) return 'not root (mounting a tmpfs needs root)';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-mnt-probe-'));
  try {
    execaSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]);
    execaSync('umount', [dir]);
    return null;
  } catch (err) {
    return `cannot mount a tmpfs: ${(err as Error).message.split('\n')[0]}`;
  } finally {
    fs.rmdirSync(dir);
  }
}
