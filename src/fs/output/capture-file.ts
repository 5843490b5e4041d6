import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BoundedOutput } from '../../util/bounded-output.js';
import { randomHex } from '../core/random-hex.js';

/** A capture file: the descriptor the command writes to, and its reader (bounded to `limit` bytes, the caller's; closes the descriptor; the first call's text is kept). */
export interface CaptureFile {
  fd: number;
  read: (limit: number) => string;
}

/**
 * A file a command's stdout and stderr both go to, in place of two pipes: Node wraps each
 * pipe of a child in a net.Socket (a stream's whole state machine), and under TCG the
 * sockets of apply-live's first systemctl action cost ~110 ms of profiled CPU each (the
 * guest's profile of a successful apply-live: createSocket 222 ms for two actions). Made
 * in the temp directory with O_EXCL and mode 0600, and unlinked at once: only its
 * descriptor remains, the child's two fds and ours. Null when it cannot be made (the
 * caller then uses pipes). `read` returns what was written, bounded as runCommand bounds
 * what pipes bring (BoundedOutput: the first and last halves), by runCommand's own limit.
 */
export function openCaptureFile(): CaptureFile | null {
  const name = path.join(os.tmpdir(), `.stagedroot-output-${process.pid}-${randomHex(8)}`);
  let fd: number;
  try {
    fd = fs.openSync(name, 'wx+', 0o600);
  } catch {
    return null;
  }
  try {
    fs.unlinkSync(name);
  } catch {
    fs.closeSync(fd);
    return null;
  }
  let text: string | undefined;
  return { fd, read: (limit) => (text ??= readCaptureFile(fd, limit)) };
}

function readCaptureFile(fd: number, limit: number): string {
  const out = new BoundedOutput(limit);
  const buf = Buffer.allocUnsafe(64 * 1024);
  try {
    for (let at = 0; ; ) {
      const n = fs.readSync(fd, buf, 0, buf.length, at);
      if (n === 0) break;
      out.push(Buffer.from(buf.subarray(0, n)));
      at += n;
    }
  } catch {
    // What could be read is the output (the command's own bytes are there or not: nothing else reads the file).
  } finally {
    fs.closeSync(fd);
  }
  return out.toString();
}
