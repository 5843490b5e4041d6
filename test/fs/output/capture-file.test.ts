/**
 * A command's output captured in an unlinked temp file instead of pipes
 * (src/fs/output/capture-file.ts, runCommand's `output`; apply-live's systemctl actions):
 * stdout and stderr in the order written, bounded as the pipes' output is, the exit code,
 * a missing executable; the child's stdout and stderr are the file, gone from the temp
 * directory.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { describe, expect, it } from 'vitest';
import { openCaptureFile } from '../../../src/fs/output/capture-file.js';
import { OUTPUT_LIMIT } from '../../../src/util/bounded-output.js';
import { parseCommand, runCommand } from '../../../src/util/run-command.js';

const run = (argv: string[], limit = OUTPUT_LIMIT) => runCommand(parseCommand(argv), { timeoutMs: 10_000, outputLimit: limit, output: openCaptureFile()! });

describe('capture file', () => {
  it('holds stdout and stderr in the order written; the exit code and a missing executable as with pipes', async () => {
    expect(await run(['sh', '-c', 'echo one; echo two >&2; echo three; exit 3'])).toMatchObject({ ok: false, exitCode: 3, notRunnable: null, output: 'one\ntwo\nthree\n' });
    expect(await run(['sh', '-c', 'echo fine'])).toMatchObject({ ok: true, exitCode: 0, output: 'fine\n' });
    expect((await run(['/nonexistent/systemctl', 'reload'])).notRunnable).toMatch(/ENOENT/);
  });

  it('is bounded as the pipes are: the first and last halves, the marker between', async () => {
    const chatty = ['sh', '-c', 'i=0; while [ $i -lt 400 ]; do echo "line $i"; i=$((i + 1)); done'];
    const piped = await runCommand(parseCommand(chatty), { timeoutMs: 10_000, outputLimit: 256 });
    const filed = await run(chatty, 256);
    expect(filed.output).toBe(piped.output);
    expect(filed.output).toMatch(/^line 0\n[^]*bytes of output dropped[^]*line 399\n$/);
  });

  it("is the child's stdout and stderr (no pipe), already unlinked from the temp directory", async () => {
    const r = await run(['sh', '-c', 'readlink /proc/self/fd/1 /proc/self/fd/2']);
    const [out, err] = r.output.trim().split('\n');
    expect(out).toBe(err);
    expect(out!.startsWith(`${os.tmpdir()}/.stagedroot-output-${process.pid}-`)).toBe(true);
    expect(out!.endsWith(' (deleted)')).toBe(true);
    expect(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(`.stagedroot-output-${process.pid}-`))).toEqual([]);
  });
});
