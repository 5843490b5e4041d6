import { StagedrootError } from '../../errors.js';
import { readBytes } from '../../fs/durable.js';
import type { Source } from '../source.js';
import { parseIgnition } from './parse.js';
import { planIgnition, type PlanOptions } from './plan.js';

export type IgnitionOptions = PlanOptions;
export { parseIgnition } from './parse.js';
export type { IgnitionConfig } from './schema.js';

/** Configs larger than this are refused (a JSON bomb is not an update). */
const MAX_CONFIG_BYTES = 64 * 1024 * 1024;

/**
 * An Ignition v3 config (3.0.0–3.5.0) already in memory, as a source. The document is
 * checked whole when planned; the change set is built against the base tree.
 */
export function ignitionSource(doc: unknown, opts: IgnitionOptions & { describe?: string } = {}): Source {
  const describe = opts.describe ?? 'config';
  return {
    kind: 'ignition',
    describe: `ignition ${describe}`,
    async plan(base) {
      return planIgnition(parseIgnition(doc, describe), base, describe, opts);
    },
  };
}

/** An Ignition config file, read when planned. */
export function ignitionFileSource(p: string, opts: IgnitionOptions = {}): Source {
  return {
    kind: 'ignition',
    describe: `ignition ${p}`,
    async plan(base) {
      const data = readBytes(p, MAX_CONFIG_BYTES);
      if (data === null) throw new StagedrootError('USAGE', `The Ignition config ${p} does not exist`, { value: p });
      let doc: unknown;
      try {
        doc = JSON.parse(data.toString('utf8'));
      } catch (err) {
        const message = (err as Error).message;
        throw new StagedrootError('SPEC_INVALID', `${p} is not valid JSON: ${message}`, { path: p, issues: [{ code: 'SPEC_INVALID', path: '', message, severity: 'error' }] });
      }
      return ignitionSource(doc, { ...opts, describe: p }).plan(base);
    },
  };
}
