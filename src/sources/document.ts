import type { z } from 'zod';
import { StagedrootError, fieldPath, issuesError, type Issue } from '../errors.js';
import { readBytes } from '../fs/core/host-paths.js';

/** Spec and config documents larger than this are refused (a JSON bomb is not an update). */
export const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;

/**
 * Reads a JSON document (an update spec, an Ignition config) from a file: at most
 * MAX_DOCUMENT_BYTES (UNSAFE_ENTRY beyond), a missing file a usage error, text that is
 * not JSON a SPEC_INVALID rejection with the parser's message as its one issue. `what`
 * names the document in messages ("The Ignition config").
 */
export function readJsonDocument(p: string, what: string): unknown {
  return parseJsonDocument(readDocumentBytes(p, what).toString('utf8'), `${what} ${p}`);
}

/** A document's bytes, read once (at most MAX_DOCUMENT_BYTES, UNSAFE_ENTRY beyond; a missing file a usage error). */
export function readDocumentBytes(p: string, what: string): Buffer {
  const data = readBytes(p, MAX_DOCUMENT_BYTES);
  if (data === null) throw new StagedrootError('USAGE', `${what} ${p} does not exist`, { value: p });
  return data;
}

export interface ParseJsonOptions {
  /**
   * The rejection for text that is not JSON: SPEC_INVALID for a document the caller wrote
   * (the default), SOURCE_CORRUPT for one inside an archive (an image's index.json).
   */
  code?: 'SPEC_INVALID' | 'SOURCE_CORRUPT';
  /** What the error is about, when not the document as a whole (a member name, a digest). */
  path?: string;
}

/** Parses a document's text; text that is not JSON is rejected, with the parser's message as the one issue. */
export function parseJsonDocument(text: string, what: string, o: ParseJsonOptions = {}): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    const message = `not valid JSON: ${(err as Error).message}`;
    const e = issuesError([{ code: o.code ?? 'SPEC_INVALID', path: '', message, severity: 'error' }], what);
    throw o.path === undefined ? e : new StagedrootError(e.code, e.message, { issues: e.issues, path: o.path, cause: err });
  }
}

/**
 * zod's issues as stagedroot issues, with field paths in the one style (`files[2].mode`).
 * A refinement may name the error code it stands for in `params.code` (PATH_ESCAPE for a
 * ".." path, say); otherwise `code` is used.
 */
export function zodIssues(err: z.ZodError, code = 'SPEC_INVALID'): Issue[] {
  return err.issues.map((i) => ({
    code: String((i as { params?: { code?: unknown } }).params?.code ?? code),
    path: fieldPath(i.path),
    message: i.code === 'unrecognized_keys' ? `unknown field(s): ${i.keys.join(', ')}` : i.message,
    severity: 'error' as const,
  }));
}
