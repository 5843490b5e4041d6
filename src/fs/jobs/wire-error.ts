import { StagedrootError, type ErrorCode, type Issue } from '../../errors.js';

/** An error as it crosses from a worker thread to the caller's (structured clone keeps no class). */
export interface WireError {
  message: string;
  /** Set for a StagedrootError: its fields, so the caller gets the same typed error back. */
  typed?: { code: ErrorCode; path?: string; resolvedPath?: string; option?: string; issues: Issue[]; errno?: string };
  /** The errno code of a plain Node error (ENOENT, ...). */
  code?: string;
  stack?: string;
}

export function toWire(err: unknown): WireError {
  if (err instanceof StagedrootError) {
    return { message: err.message, typed: { code: err.code, path: err.path, resolvedPath: err.resolvedPath, option: err.option, issues: err.issues, errno: err.errno }, stack: err.stack };
  }
  const e = err as { message?: unknown; code?: unknown; stack?: unknown } | null;
  return {
    message: typeof e?.message === 'string' ? e.message : String(err),
    ...(typeof e?.code === 'string' ? { code: e.code } : {}),
    ...(typeof e?.stack === 'string' ? { stack: e.stack } : {}),
  };
}

export function fromWire(w: WireError): Error {
  if (w.typed) {
    const t = w.typed;
    const err = new StagedrootError(t.code, w.message, { path: t.path, resolvedPath: t.resolvedPath, option: t.option, issues: t.issues, errno: t.errno });
    if (w.stack) err.stack = w.stack;
    return err;
  }
  const err = new Error(w.message) as Error & { code?: string };
  if (w.code !== undefined) err.code = w.code;
  if (w.stack) err.stack = w.stack;
  return err;
}
