import { parseJsonDocument, readDocumentBytes } from '../document.js';
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

const WHAT = 'The Ignition config';

/** An Ignition config file, read when planned. */
export function ignitionFileSource(p: string, opts: IgnitionOptions = {}): Source {
  return {
    kind: 'ignition',
    describe: `ignition ${p}`,
    async plan(base) {
      return ignitionDocumentSource(p, readDocumentBytes(p, WHAT), opts).plan(base);
    },
  };
}

/**
 * An Ignition config file already read (`data`: the bytes its kind was detected from and
 * its signature is checked against), parsed when planned: the file is not read again.
 */
export function ignitionDocumentSource(p: string, data: Buffer, opts: IgnitionOptions = {}): Source {
  return {
    kind: 'ignition',
    describe: `ignition ${p}`,
    async plan(base) {
      return ignitionSource(parseJsonDocument(data.toString('utf8'), `${WHAT} ${p}`), { ...opts, describe: p }).plan(base);
    },
  };
}
