import { describe, expect, it } from 'vitest';
import { formatActivation } from '../../src/cli/format-activation.js';

describe('formatActivation', () => {
  it('says live with its actions, or reboot with each reason and how many were left out', () => {
    expect(formatActivation({ mode: 'live', drain: true, actions: [{ type: 'Reload', reload: { serviceName: 'crio.service' } }], reasons: [] })).toBe('activation: live without a reboot (Reload crio.service), after a drain\n');
    const reboot = formatActivation({ mode: 'reboot', drain: true, actions: [{ type: 'Reboot' }], reasons: [{ path: '/boot/vmlinuz', why: 'the kernel or initramfs changed' }, { field: 'kernelArguments', why: 'the kernel arguments changed' }], reasonsOmitted: 5316 });
    expect(reboot.split('\n')).toEqual(['activation: needs a reboot', '  /boot/vmlinuz: the kernel or initramfs changed', '  kernelArguments: the kernel arguments changed', '  … and 5316 more of these', '']);
  });
});
