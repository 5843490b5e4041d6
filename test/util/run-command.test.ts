/**
 * runCommand's timeout and abort stop the command's whole process group: a child the
 * command started (a hook's `sleep`) is killed with it, and the run returns. execa's own
 * `timeout` signals the command's pid only, which is why runCommand does not use it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCommand, runCommand } from '../../src/util/run-command.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-run-command-'));
const strays: number[] = [];
afterAll(() => {
  for (const pid of strays) if (alive(pid)) process.kill(pid, 'SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A shell that starts a long `sleep` in the background, writes its pid to `file`, says so, and waits for it. */
const withChild = (file: string) => parseCommand(['sh', '-c', `sleep 600 & echo $! > ${file}; echo started; wait`]);
const childPid = (file: string) => Number(fs.readFileSync(file, 'utf8').trim());

/** Waits until `pid` is gone (the kernel reaps a killed orphan through init, not at once). */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 25));
  return !alive(pid);
}

describe('runCommand', () => {
  it('a timeout kills the command and the children it started, and returns', async () => {
    const file = path.join(dir, 'timeout.pid');
    const r = await runCommand(withChild(file), { timeoutMs: 500 });
    const pid = childPid(file);
    strays.push(pid);
    expect(r).toMatchObject({ ok: false, timedOut: true });
    expect(r.output).toContain('started');
    expect(await gone(pid)).toBe(true);
  });

  it('an abort does the same', async () => {
    const file = path.join(dir, 'abort.pid');
    const ac = new AbortController();
    const r = await runCommand(withChild(file), { timeoutMs: 600_000, signal: ac.signal, onOutput: (t) => t.includes('started') && ac.abort() });
    const pid = childPid(file);
    strays.push(pid);
    expect(r.ok).toBe(false);
    expect(await gone(pid)).toBe(true);
  });

  it("(why) execa's own timeout leaves the command's children running", async () => {
    const file = path.join(dir, 'execa.pid');
    const r = await execa('sh', ['-c', `sleep 600 & echo $! > ${file}; wait`], { timeout: 500, reject: false, stdio: 'ignore' });
    const pid = childPid(file);
    strays.push(pid);
    expect(r.timedOut).toBe(true);
    expect(alive(pid)).toBe(true); // the shell is gone, its sleep is not
  });
});
