import type { z } from 'zod';
import { StagedrootError, fieldPath } from '../errors.js';

/** Why a JSON file is refused: not JSON (the parse error), or not its schema (the first three issues, each with its field). */
export type JsonProblem = { kind: 'json'; detail: string; cause: unknown } | { kind: 'schema'; detail: string };

/**
 * A file stagedroot wrote as JSON (state, delta, config record, settings, a live apply's
 * journal), read back against its schema. Anything else is STATE_CORRUPT naming the file,
 * or the error `corrupt` makes of the problem. `what` names the schema in the message
 * ("the delta schema").
 */
export function parseJsonState<S extends z.ZodTypeAny>(text: string, file: string, schema: S, what: string, corrupt: (p: JsonProblem) => StagedrootError = (p) => stateCorrupt(file, what, p)): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw corrupt({ kind: 'json', detail: (err as Error).message, cause: err });
  }
  const r = schema.safeParse(raw);
  if (!r.success) throw corrupt({ kind: 'schema', detail: r.error.issues.slice(0, 3).map((i) => `${fieldPath(i.path) || '(root)'}: ${i.message}`).join('; ') });
  return r.data as z.output<S>;
}

function stateCorrupt(file: string, what: string, p: JsonProblem): StagedrootError {
  return p.kind === 'json'
    ? new StagedrootError('STATE_CORRUPT', `${file} is not valid JSON (${p.detail})`, { path: file, cause: p.cause })
    : new StagedrootError('STATE_CORRUPT', `${file} does not match the ${what} schema: ${p.detail}`, { path: file });
}
