import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findKernel } from '../../../src/boot/entries/kernels.js';

describe('findKernel: the kernel a deployment boots', () => {
  let tree: string;
  const put = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(tree, rel)), { recursive: true });
    fs.writeFileSync(path.join(tree, rel), text);
  };
  beforeEach(() => {
    tree = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-kernels-'));
    // Debian with two flavours of one version: the cloud kernel the machine had, the generic one installed since.
    for (const v of ['6.1.0-50-cloud-amd64', '6.1.0-50-amd64']) {
      put(`boot/vmlinuz-${v}`, `kernel ${v}\n`);
      put(`boot/initrd.img-${v}`, `initrd ${v}\n`);
    }
  });
  afterEach(() => fs.rmSync(tree, { recursive: true, force: true }));

  it("the one Debian's /vmlinuz link names (the kernel installed last), not the highest name", () => {
    expect(findKernel(tree)?.version).toBe('6.1.0-50-cloud-amd64'); // no link: the highest version string
    fs.symlinkSync('boot/vmlinuz-6.1.0-50-amd64', path.join(tree, 'vmlinuz'));
    expect(findKernel(tree)).toMatchObject({ version: '6.1.0-50-amd64', kernelPath: 'boot/vmlinuz-6.1.0-50-amd64', initrdPath: 'boot/initrd.img-6.1.0-50-amd64' });
  });

  it('the link in /boot (link_in_boot) counts too; a link to a kernel the tree lacks is passed over', () => {
    fs.symlinkSync('/boot/vmlinuz-6.1.0-50-amd64', path.join(tree, 'boot/vmlinuz'));
    expect(findKernel(tree)?.version).toBe('6.1.0-50-amd64');
    fs.rmSync(path.join(tree, 'boot/vmlinuz'));
    fs.symlinkSync('boot/vmlinuz-9.9.9-amd64', path.join(tree, 'vmlinuz'));
    expect(findKernel(tree)?.version).toBe('6.1.0-50-cloud-amd64');
  });
});
