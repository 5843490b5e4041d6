import { afterEach, describe, expect, it } from 'vitest';
import { applyKernelArguments } from '../../src/state/kernel-args.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

const kargs = (t: TempSysroot, id: string) => t.sysroot.status().deployments.find((d) => d.id === id)?.kernelArguments;

describe('kernel arguments per deployment', () => {
  it('applyKernelArguments: shouldNotExist removes every equal one, shouldExist appends what is missing, in order', () => {
    expect(applyKernelArguments(['quiet', 'a=1', 'quiet'], { shouldExist: ['b=2', 'a=1', 'c'], shouldNotExist: ['quiet'] })).toEqual(['a=1', 'b=2', 'c']);
    expect(applyKernelArguments(['x'], undefined)).toEqual(['x']);
  });

  it('a spec sets them, the next update inherits and changes them, status --json shows them per deployment', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    expect(kargs(t, '0001')).toEqual([]);
    const a = await t.sysroot.stage({ label: 'k1', kernelArguments: { shouldExist: ['mitigations=off', 'console=ttyS0'] } });
    expect(kargs(t, a.id)).toEqual(['mitigations=off', 'console=ttyS0']);
    await t.sysroot.finalize();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    const b = await t.sysroot.stage({ label: 'k2', files: [{ path: '/etc/a', contents: '2\n' }], kernelArguments: { shouldNotExist: ['mitigations=off'], shouldExist: ['nosmt'] } });
    expect(kargs(t, b.id)).toEqual(['console=ttyS0', 'nosmt']);
    // The rollback keeps its own.
    expect(kargs(t, a.id)).toEqual(['mitigations=off', 'console=ttyS0']);
  });

  it('Ignition kernelArguments (spec 3.3.0 and later) set them; an older spec version is rejected, naming the field', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    const r = await t.sysroot.stage({ ignition: { version: '3.4.0' }, kernelArguments: { shouldExist: ['systemd.unified_cgroup_hierarchy=1'], shouldNotExist: ['quiet'] } });
    expect(kargs(t, r.id)).toEqual(['systemd.unified_cgroup_hierarchy=1']);
    await expect(t.sysroot.stage({ ignition: { version: '3.2.0' }, kernelArguments: { shouldExist: ['x'] } })).rejects.toMatchObject({
      issues: [expect.objectContaining({ code: 'SOURCE_UNSUPPORTED', path: 'kernelArguments', message: expect.stringContaining('3.3.0 and later') })],
    });
  });

  it('an argument with whitespace in it is a spec error', async () => {
    t = await tempSysroot({ tree: {} });
    await expect(t.sysroot.stage({ kernelArguments: { shouldExist: ['a b'] } })).rejects.toMatchObject({ code: 'SPEC_INVALID', issues: [expect.objectContaining({ path: expect.stringContaining('kernelArguments.shouldExist') })] });
  });
});
