/**
 * What "unchanged" means for the /etc merge and for verify: never size + mtime alone.
 * Every edit here keeps the file's size and mtime (what `touch -r`, `cp -p`, `rsync -a`,
 * `install -p` or a filesystem with whole-second times produce), or changes only its
 * mode or an extended attribute; finalize carries each one into the new deployment,
 * whether it was made before or after the stage, and `verify` reports each as drift.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readXattrs } from '../../src/fs/core/xattr.js';
import { buildTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { toolSync } from '../helpers/tools.js';
import { BASE_TREE } from '../helpers/trees.js';

/** A whole second in the past: files that share it look alike to a cache of size + mtime. */
const EPOCH = new Date('2026-01-01T00:00:00Z');
const TREE = {
  ...BASE_TREE,
  'etc/app.conf': 'enabled=0\n',
  'etc/app.conf.example': 'enabled=1\n', // same size as app.conf: the image gives both the same mtime
  'etc/mode.conf': 'mode\n',
  'etc/attr.conf': 'attr\n',
};
const EDITED = ['etc/app.conf', 'etc/mode.conf', 'etc/attr.conf'];

/** The edits, each leaving etc/app.conf at `enabled=1` with its size and mtime unchanged. */
const EDITS: Record<string, (etc: string) => void> = {
  'touch -r': (etc) => {
    const f = path.join(etc, 'app.conf');
    fs.copyFileSync(f, `${f}.ref`);
    toolSync('touch', ['-r', f, `${f}.ref`]);
    fs.writeFileSync(f, 'enabled=1\n');
    toolSync('touch', ['-r', `${f}.ref`, f]);
    fs.unlinkSync(`${f}.ref`);
  },
  'cp -p': (etc) => toolSync('cp', ['-p', path.join(etc, 'app.conf.example'), path.join(etc, 'app.conf')]),
  'rsync -a': (etc) => {
    const src = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-rsync-'));
    toolSync('cp', ['-p', path.join(etc, 'app.conf.example'), path.join(src, 'app.conf')]);
    // --checksum: rsync's own quick check trusts size + mtime too, and would skip the file.
    toolSync('rsync', ['-a', '--checksum', `${src}/app.conf`, path.join(etc, 'app.conf')]);
    fs.rmSync(src, { recursive: true });
  },
  'a same-size write within the same second (whole-second times)': (etc) => {
    const f = path.join(etc, 'app.conf');
    fs.writeFileSync(f, 'enabled=1\n');
    fs.utimesSync(f, EPOCH, EPOCH);
  },
};

/** The first tree with every /etc file at the same whole-second mtime, as an image built with SOURCE_DATE_EPOCH has. */
function imageLike(dir: string): string {
  buildTree(dir, TREE);
  const etc = path.join(dir, 'etc');
  for (const n of fs.readdirSync(etc)) if (fs.lstatSync(path.join(etc, n)).isFile()) fs.utimesSync(path.join(etc, n), EPOCH, EPOCH);
  return dir;
}

/** The mode-only and xattr-only edits, beside the content edit. */
function otherEdits(etc: string): void {
  fs.chmodSync(path.join(etc, 'mode.conf'), 0o600);
  toolSync('setfattr', ['-n', 'user.site', '-v', 'edge', path.join(etc, 'attr.conf')]);
}

describe('a local edit that keeps size and mtime', () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());

  for (const [name, edit] of Object.entries(EDITS)) {
    for (const when of ['after', 'before'] as const) {
      it(`${name}, ${when} the stage: carried by finalize; verify reports it`, async () => {
        const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-unchanged-'));
        t = await tempSysroot({ fromDirectory: imageLike(path.join(scratch, 'tree')) });
        fs.rmSync(scratch, { recursive: true });
        const s = t.sysroot;
        const etc = path.join(s.treePath('0001'), 'etc');
        const before = fs.statSync(path.join(etc, 'app.conf'));
        const stage = () => s.stage({ files: [{ path: '/etc/unrelated.conf', contents: 'u=1\n' }] });
        if (when === 'after') await stage();
        edit(etc);
        otherEdits(etc);
        const after = fs.statSync(path.join(etc, 'app.conf'));
        expect([after.size, after.mtimeMs]).toEqual([before.size, before.mtimeMs]);
        if (when === 'before') await stage();

        const drift = (await s.verify('0001')).drift;
        expect(drift.map((d) => `${d.path} ${d.kind}`).sort()).toEqual(['etc/app.conf content', 'etc/attr.conf xattrs', 'etc/mode.conf mode']);

        const fin = await s.finalize();
        const cur = s.treePath(fin.id!);
        expect(fs.readFileSync(path.join(cur, 'etc/app.conf'), 'utf8')).toBe('enabled=1\n');
        expect(fs.statSync(path.join(cur, 'etc/mode.conf')).mode & 0o7777).toBe(0o600);
        expect(readXattrs(path.join(cur, 'etc/attr.conf'))).toEqual([['user.site', Buffer.from('edge')]]);
        expect(fs.readFileSync(path.join(cur, 'etc/unrelated.conf'), 'utf8')).toBe('u=1\n');
        if (when === 'after') expect(s.status().lastMerge).toMatchObject({ carried: EDITED.length, conflicts: [] });
        // The new deployment's manifest says what its tree holds.
        expect((await s.verify(fin.id!)).drift).toEqual([]);
      });
    }
  }
});
