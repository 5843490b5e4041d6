import { StagedrootError } from '../../errors.js';
import { SourceFile } from '../../fs/core/file-chunks.js';
import { compressionOf, decompress } from './decompress.js';
import { DEFAULT_LAYER_LIMITS } from '../layer/entry-checks.js';
import type { LayerReader } from '../layer/entry.js';
import { planLayer, type LayerOptions } from '../layer/plan.js';
import type { Source } from '../source.js';
import { readTarEntries } from './reader.js';

export type TarLayerOptions = LayerOptions;

/**
 * A `.tar`, `.tar.gz` or `.tar.zst` file applied over the booted tree with OCI layer
 * semantics (or, with `replace`, as the whole new tree). Streamed in two passes (see
 * layer/plan.ts): checked whole before any write, then applied entry by entry.
 */
export function tarLayerSource(p: string, o: TarLayerOptions = {}): Source {
  const where = `layer ${p}`;
  return {
    kind: 'tar',
    describe: where,
    plan: () => planLayer(tarReader(p, where, o), o),
  };
}

function tarReader(p: string, where: string, o: TarLayerOptions): LayerReader {
  const limits = { ...DEFAULT_LAYER_LIMITS, ...o.limits };
  let identity: string | null = null;
  return {
    where,
    async *entries() {
      const file = SourceFile.open(p);
      try {
        // Pass 2 must read the very file pass 1 checked.
        if (identity === null) identity = file.identity;
        else if (file.identity !== identity) throw new StagedrootError('SOURCE_CORRUPT', `The source ${p} changed while it was being staged`, { path: p });
        const compression = compressionOf(file.head(8), where);
        yield* readTarEntries(decompress(file.chunks(), compression, where), where, limits);
        file.assertUnchanged();
      } finally {
        file.close();
      }
    },
  };
}
