import { describe, expect, it } from 'vitest';
import { isUnderAny } from '../../../src/fs/core/paths.js';

describe('isUnderAny', () => {
  const removed = new Set(['etc/a', 'usr/lib/x']);
  it('is true for a path of the set and for any path below one', () => {
    expect(isUnderAny('etc/a', removed)).toBe(true);
    expect(isUnderAny('etc/a/b', removed)).toBe(true);
    expect(isUnderAny('usr/lib/x/y/z', removed)).toBe(true);
  });
  it('is false for a sibling that shares a name prefix, a parent, and an empty set', () => {
    expect(isUnderAny('etc/ab', removed)).toBe(false);
    expect(isUnderAny('etc', removed)).toBe(false);
    expect(isUnderAny('usr/lib', removed)).toBe(false);
    expect(isUnderAny('etc/a', new Set())).toBe(false);
  });
});
