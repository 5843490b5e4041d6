import { describe, expect, it } from 'vitest';
import { objectKey } from '../../src/layer-store/store.js';

/**
 * Object keys name the store's files on disk: a key must never change for the same
 * content and attributes (a store written by an earlier version is read by this one).
 * These values were computed by the incremental hash objectKey had before it hashed the
 * attribute-less case in one call.
 */
describe('objectKey', () => {
  it('is the same key as before, with and without extended attributes', () => {
    expect(objectKey('a'.repeat(64), { mode: 0o644, uid: 0, gid: 0, mtime: 1700000000 })).toBe('b3b286e74542cf84e5284a8cbfe97c8c0cab51b6a2033af7b025292c89a33180');
    expect(objectKey('b'.repeat(64), { mode: 0o755 })).toBe('e913530cf28caac38ee23d922f2f53c251e171a250e167889fe8d0c57859c536');
    expect(objectKey('c'.repeat(64), { mode: 0o644, uid: 1000, gid: 100, mtime: 5, xattrs: [['user.z', Buffer.from('1')], ['security.capability', Buffer.from([1, 2, 3])]] })).toBe('d3254843457adc1cf7f3590c4484084dc25a62d89841fdf46d2218d1aed3e173');
    expect(objectKey('c'.repeat(64), { mode: 0o644, uid: 1000, gid: 100, mtime: 5, xattrs: [] })).toBe('f05cdbe638d41827f2ccd52ea805de935da16670b8e013c26c06f95ba080342d');
  });
});
