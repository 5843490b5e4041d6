import { afterEach, describe, expect, it, vi } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { pullProgress } from '../../src/cli/pull-progress.js';

const io = (errIsTty: boolean, sink: { text: string }) => ({ out: () => {}, err: (t: string) => void (sink.text += t), errIsTty, env: {} });
const fetch = (bytes: number, cached = 0) => ({ digest: 'sha256:00', what: 'layer 1/1', bytes, size: 4_000_000, fetched: bytes - cached, cached });

describe('a pull\'s progress on stderr', () => {
  afterEach(() => vi.useRealTimers());

  it('on a terminal: one line redrawn, throttled except the layer\'s last, wiped before a mirror warning and at the end', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000); // the clock stands still: the second event is within 100 ms of the first
    const sink = { text: '' };
    const p = pullProgress(io(true, sink), false);
    p.options.onProgress!(fetch(1_000_000, 500_000));
    p.options.onProgress!(fetch(2_000_000)); // throttled: not drawn
    p.options.onProgress!(fetch(4_000_000)); // the layer's last: drawn at once
    p.options.onMirrorFailed!({ mirror: 'mirror.example/app', error: new StagedrootError('REGISTRY_FAILED', 'refused') });
    p.done();
    expect(sink.text.split('\r')).toEqual([
      '',
      '[########......................] fetch    layer 1/1 1.0 MB of 4.0 MB (0.5 MB already here)\x1b[K',
      '[##############################] fetch    layer 1/1 4.0 MB of 4.0 MB\x1b[K',
      '\x1b[Kstagedroot: warning: the mirror mirror.example/app failed (refused); trying the next\n',
      '\x1b[K',
    ]);
  });

  it('elsewhere only the mirror warning; with --json a JSON line per event', () => {
    const pipe = { text: '' };
    const p = pullProgress(io(false, pipe), false);
    expect(p.options.onProgress).toBeUndefined();
    p.options.onMirrorFailed!({ mirror: 'm', error: new StagedrootError('REGISTRY_FAILED', 'x') });
    expect(pipe.text).toBe('stagedroot: warning: the mirror m failed (x); trying the next\n');
    const json = { text: '' };
    pullProgress(io(true, json), true).options.onProgress!(fetch(1));
    expect(JSON.parse(json.text)).toEqual({ progress: 'fetch', ...fetch(1) });
  });
});
