import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesystemPath } from '../../../src/fs/core/mount-path.js';
import { mountProof, provenFilesystemPath } from '../../../src/boot/entries/mount-proof.js';

describe('mountProof: the sysroot\'s place on its filesystem without mountinfo', () => {
  let base: string;
  let root: string;
  const later = () => Date.now() + 60_000; // every stamp counts as old
  beforeEach(() => {
    base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-mount-proof-')));
    root = path.join(base, 'a', 'sysroot');
    fs.mkdirSync(root, { recursive: true });
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  const proof = () => {
    const fp = filesystemPath(root)!;
    return mountProof(root, fp.mountRoot === '/' ? fp : { ...fp, mountRoot: '/' }, later())!;
  };

  it('holds while nothing on the way changed, whatever happens inside the sysroot', () => {
    const p = proof();
    expect(provenFilesystemPath(p, root)).toEqual(p.fp);
    fs.mkdirSync(path.join(root, 'lock'));
    fs.rmdirSync(path.join(root, 'lock'));
    expect(provenFilesystemPath(p, root)).toEqual(p.fp);
  });

  it('fails after a directory on the way is renamed (a symlink at its old name), an entry is added beside the sysroot, the sysroot is replaced', () => {
    const cases: (() => void)[] = [
      () => (fs.renameSync(path.join(base, 'a'), path.join(base, 'b')), fs.symlinkSync('b', path.join(base, 'a'))),
      () => fs.writeFileSync(path.join(base, 'a', 'beside'), ''),
      () => (fs.renameSync(root, path.join(base, 'moved')), fs.mkdirSync(root)),
    ];
    for (const [i, change] of cases.entries()) {
      const p = proof();
      change();
      expect(provenFilesystemPath(p, root), `case ${i}`).toBeNull();
      fs.rmSync(base, { recursive: true, force: true });
      fs.mkdirSync(root, { recursive: true });
    }
  });

  it('none under a bind mount of a subdirectory or a subvolume (mountinfo root not /), nor from stamps younger than the margin', () => {
    const fp = filesystemPath(root)!;
    expect(mountProof(root, { ...fp, mountRoot: '/sub' }, later())).toBeNull();
    expect(mountProof(root, { ...fp, mountRoot: '/' }, Date.now() - 60_000)).toBeNull();
    expect(mountProof(root, null, later())).toBeNull();
  });
});
