import type { z } from 'zod';
import { StagedrootError, fieldPath } from '../errors.js';

/**
 * A file stagedroot wrote as JSON (state, delta, config record, settings), read back
 * against its schema. Anything else is STATE_CORRUPT naming the file: not JSON (the parse
 * error), or not what the schema says (the first three issues, each with its field).
 * `what` names the schema in the message ("the delta schema").
 */
export function parseJsonState<S extends z.ZodTypeAny>(text: string, file: string, schema: S, what: string): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new StagedrootError('STATE_CORRUPT', `${file} is not valid JSON (${(err as Error).message})`, { path: file, cause: err });
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issues = r.error.issues.slice(0, 3).map((i) => `${fieldPath(i.path) || '(root)'}: ${i.message}`);
    throw new StagedrootError('STATE_CORRUPT', `${file} does not match the ${what} schema: ${issues.join('; ')}`, { path: file });
  }
  return r.data as z.output<S>;
}
