/** isTreePath: the shape of a tree path stagedroot records (live-apply journals, shared ops), checked when they are read back. */
import { describe, expect, it } from 'vitest';
import { isTreePath } from '../../../src/fs/core/paths.js';
import { parseSharedOps } from '../../../src/persistent-dirs/ops.js';
import { journalEntrySchema } from '../../../src/activation/live/journal.js';

describe('isTreePath', () => {
  it('accepts relative paths of real components, byte-escaped names included', () => {
    for (const p of ['etc', 'etc/hosts', 'var/lib/kubelet/config.json', 'a/caf\udce9', 'etc/..x', 'etc/.hidden']) expect(isTreePath(p), p).toBe(true);
  });
  it('refuses absolute, empty, ., .. and NUL components, where a source path would be normalised', () => {
    for (const p of ['', '/etc', 'etc/', 'etc//hosts', './etc', 'etc/.', '../etc', 'etc/../../x', 'etc/a\0b']) expect(isTreePath(p), JSON.stringify(p)).toBe(false);
  });
  it('is what the shared ops and the journal check when read back', () => {
    expect(parseSharedOps('{"ops":[{"op":"put","path":"var/lib/x","when":"absent"}]}', 'f')).toHaveLength(1);
    expect(() => parseSharedOps('{"ops":[{"op":"put","path":"var/../../etc/shadow","when":"absent"}]}', 'f')).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT' }));
    const entry = (path: string) => journalEntrySchema.safeParse({ path, change: 'remove', before: { kind: 'absent' } }).success;
    expect(entry('etc/hosts')).toBe(true);
    expect(entry('/etc/hosts')).toBe(false);
    expect(entry('etc/../hosts')).toBe(false);
  });
});
