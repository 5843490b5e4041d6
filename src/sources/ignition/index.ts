import { readJsonDocument } from '../document.js';
import type { Source } from '../source.js';
import { checkIgnition } from './parse.js';
import { planIgnition, type PlanOptions } from './plan.js';

export type IgnitionOptions = PlanOptions;
export { checkIgnition, parseIgnition, type CheckedIgnition } from './parse.js';
export type { IgnitionConfig } from './schema.js';

/**
 * An Ignition v3 config (3.0.0–3.6.0) already in memory, as a source. The document is
 * checked whole when planned; the change set is built against the base tree.
 */
export function ignitionSource(doc: unknown, opts: IgnitionOptions & { describe?: string } = {}): Source {
  const describe = opts.describe ?? 'config';
  return {
    kind: 'ignition',
    describe: `ignition ${describe}`,
    async plan(base) {
      return planIgnition(checkIgnition(doc, describe), base, describe, opts);
    },
  };
}

/** An Ignition config file, read when planned. */
export function ignitionFileSource(p: string, opts: IgnitionOptions = {}): Source {
  return {
    kind: 'ignition',
    describe: `ignition ${p}`,
    async plan(base) {
      return ignitionSource(readJsonDocument(p, 'The Ignition config'), { ...opts, describe: p }).plan(base);
    },
  };
}
