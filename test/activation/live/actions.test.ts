/**
 * apply-live's systemctl runs (src/activation/live/actions.ts): the command and its
 * arguments as the service manager gives them, the output captured in a file rather than
 * pipes (fs/output/capture-file.ts), a failure's exit code and output in the result.
 */
import { describe, expect, it } from 'vitest';
import { systemctl } from '../../../src/activation/live/actions.js';

describe('systemctl', () => {
  it("runs the manager's command with the arguments, its output captured in a file, a failure's exit and output kept", async () => {
    const m = { command: ['sh', '-c', 'echo "args: $*"; readlink /proc/self/fd/1 /proc/self/fd/2; echo "Job for $2 failed" >&2; exit 1', 'systemctl'] };
    const r = await systemctl(m, ['restart', 'x.service']);
    expect(r).toMatchObject({ ok: false, exitCode: 1 });
    const [args, out, err, job] = r.output.trim().split('\n');
    expect(args).toBe('args: restart x.service');
    expect(out).toBe(err);
    expect(out).toMatch(/\.stagedroot-output-.* \(deleted\)$/);
    expect(job).toBe('Job for x.service failed');
  });
});
