import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const IO = new URL('../../dist/cli/io.js', import.meta.url).href;

/**
 * processIo writes fd 1 and 2 directly (fs.writeSync), not through Node's streams; what
 * cannot go at once goes through the stream, in order. Run in a child whose stdout is a
 * pipe nobody reads for a while: once process.stdout exists, Node has made the pipe
 * non-blocking, so a write fills it and fails with EAGAIN.
 */
function through(script: string): { out: string; err: string; code: number | null } {
  const driver = `import { processIo } from ${JSON.stringify(IO)};\n${script}`;
  const r = spawnSync('sh', ['-c', `"${process.execPath}" --input-type=module -e "$DRIVER" | (sleep 1; cat)`], { encoding: 'utf8', env: { ...process.env, DRIVER: driver }, maxBuffer: 1 << 24 });
  return { out: r.stdout, err: r.stderr, code: r.status };
}

describe('the CLI\'s stdout and stderr', () => {
  it('carry everything, in order, when the pipe is full and non-blocking', () => {
    const r = through("void process.stdout; for (const c of 'abcdefgh') processIo.out(c.repeat(100_000)); processIo.out('end\\n'); processIo.err(`queued ${process.stdout.writableLength > 0}\\n`);");
    expect(r.code).toBe(0);
    expect(r.err).toBe('queued true\n'); // the stream took over
    expect(r.out).toBe([...'abcdefgh'].map((c) => c.repeat(100_000)).join('') + 'end\n');
  });

  it('carry multi-byte text whole, without making the stream when the writes go at once', () => {
    const r = through("processIo.out('é€😀\\n'.repeat(30_000)); const made = process.moduleLoadList.includes('NativeModule net'); process.stderr.write(`${made}\\n`);");
    expect(r.out).toBe('é€😀\n'.repeat(30_000));
    expect(r.err).toBe('false\n');
  });
});
