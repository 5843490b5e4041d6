import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Issue } from '../../src/errors.js';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { hashTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import type { ValidatorFn } from '../../src/validate/types.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

describe('the validation context', () => {
  it('gives a validator the staged and the booted tree read-only, resolved inside each tree', async () => {
    t = await tempSysroot({ tree: { 'usr/lib/os-release': 'ID=old\n', 'etc/os-release': { symlink: '/usr/lib/os-release' } } });
    const booted = t.sysroot.treePath(t.sysroot.status().booted!);
    const before = hashTree(booted);
    const seen: string[] = [];
    const compare: ValidatorFn = (ctx) => {
      expect(ctx.staged).toBeInstanceOf(ReadOnlyTree);
      expect(ctx.staged.root).toBe(ctx.tree);
      // etc/os-release -> /usr/lib/os-release: the tree's own file, not the host's.
      seen.push(ctx.staged.readFile('etc/os-release')!.toString(), ctx.base!.readFile('etc/os-release')!.toString());
      return [];
    };
    const r = await t.sysroot.stage({ files: [{ path: '/usr/lib/os-release', contents: 'ID=new\n' }] }, { validators: [compare] });
    expect(seen).toEqual(['ID=new\n', 'ID=old\n']);
    expect(fs.readFileSync(path.join(r.path, 'usr/lib/os-release'), 'utf8')).toBe('ID=new\n');
    expect(hashTree(booted)).toBe(before);
  });
});

/** Type-level proof (checked by `tsc --noEmit` in `npm run lint`): a validator cannot write through its context. */
export const validatorThatTriesToWrite: ValidatorFn = (ctx): Issue[] => {
  if (Math.random() > 2) {
    // @ts-expect-error the staged tree is read-only
    ctx.staged.writeFile('etc/motd', Buffer.from('x'));
    // @ts-expect-error the booted tree is read-only
    ctx.base?.remove('etc/passwd');
  }
  return [];
};
