/**
 * One error class for the whole library, with a stable `code`. Callers branch on
 * `code`, never on the message. The CLI maps codes to exit codes (see `exitCodeFor`).
 */
export type ErrorCode =
  | 'BUSY' // another writer holds the sysroot lock
  | 'USAGE' // a bad option or argument from the caller
  | 'NOT_A_SYSROOT' // the directory holds no sysroot
  | 'SYSROOT_EXISTS' // init over an existing sysroot
  | 'STATE_CORRUPT' // a state file cannot be parsed and no good copy exists
  | 'SPEC_INVALID' // a source document is malformed (issues list every bad field)
  | 'SOURCE_UNSUPPORTED' // a source kind or field stagedroot does not handle
  | 'SOURCE_CORRUPT' // truncated or corrupt archive / bad hash / bad data URL
  | 'PATH_ESCAPE' // a path or link target leaves the root
  | 'UNSAFE_ENTRY' // devices, FIFOs, absurd depth, bombs
  | 'APPLY_FAILED' // an operation could not be applied to the tree (ENOTDIR, EEXIST, ...)
  | 'VALIDATION_FAILED' // a validator reported an error-severity issue
  | 'NO_SPACE' // not enough free space (figures in the message)
  | 'NOT_FOUND' // a deployment id that does not exist
  | 'NO_MANIFEST' // a failed deployment whose stage stopped before its manifest was written
  | 'NOTHING_STAGED'
  | 'NO_ROLLBACK'
  | 'INVALID_TRANSITION' // the lifecycle does not allow this operation now
  | 'FINALIZE_FAILED'
  | 'MERGE_CONFLICT' // local changes and the update disagree on a path's type (directory or not)
  | 'TOOL_MISSING' // an external tool (systemctl, sync) is not installed
  | 'READ_ONLY' // `install`: a target is on a read-only filesystem (the booted /usr), nothing written
  | 'ABORTED' // the caller's AbortSignal cancelled the operation
  | 'SIGNATURE_INVALID' // a source is unsigned, wrongly signed, or signed by a key the sysroot does not trust
  | 'HOOK_REJECTED' // a pre-stage hook failed: the update is rejected
  | 'COMMAND_FAILED' // `stage --run`: the command failed (exit, signal, timeout) in the new tree
  | 'HOOK_FAILED' // a pre-finalize hook failed: finalize did not run
  | 'INVARIANT_VIOLATED' // a state write that would break an invariant was refused (a bug, nothing written)
  | 'XATTR_UNSUPPORTED' // the target filesystem refuses an extended attribute a tree carries
  | 'NAME_UNREPRESENTABLE' // a file name that cannot be kept byte for byte
  | 'FLEETLOCK_FAILED' // a FleetLock server refused or did not answer (kind, value and status code in the error)
  | 'REGISTRY_FAILED' // a container registry did not answer, refused the credentials or the request, or failed mid-transfer (the image, the blob and the cause in the message)
  | 'LIVE_NOT_POSSIBLE' // apply-live of a deployment whose activation decision is a reboot (the reasons name what forces it), nothing changed
  | 'LIVE_JOURNAL_CORRUPT' // a live apply's intent journal (or a before-image beside it) cannot be read back whole (nothing is guessed)
  | 'LIVE_ACTION_FAILED' // a live apply's systemctl action (daemon-reload, reload, restart) failed: its exit and output are in the error
  | 'IO'; // any other filesystem error

/** Codes that mean "the update was rejected; nothing changed but the failure record" (exit 3). */
export const REJECTION_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'SPEC_INVALID',
  'SOURCE_UNSUPPORTED',
  'SOURCE_CORRUPT',
  'PATH_ESCAPE',
  'UNSAFE_ENTRY',
  'APPLY_FAILED',
  'VALIDATION_FAILED',
  'MERGE_CONFLICT',
  'SIGNATURE_INVALID',
  'HOOK_REJECTED',
  'COMMAND_FAILED',
  'NAME_UNREPRESENTABLE',
  'LIVE_NOT_POSSIBLE',
]);

/** A problem found in an input or a tree, in the shape zod uses: code, path, message. */
export interface Issue {
  code: string;
  /** Where: a field path in a document ("files[2].mode") or a path in a tree ("etc/foo"). */
  path: string;
  message: string;
  severity: 'error' | 'warning';
}

export interface ErrorDetails {
  /** The path inside the root (or the field path) the error is about. */
  path?: string;
  /** The path on the host the error is about, after resolution. */
  resolvedPath?: string;
  option?: string;
  value?: unknown;
  /** A list of issues (spec fields, validator results). */
  issues?: Issue[];
  /** The errno code of an underlying filesystem error (ENOTDIR, ENOSPC, ...). */
  errno?: string;
  /**
   * SOURCE_CORRUPT of content that failed its digest check (a blob's digest or size, a
   * layer's diff_id): the digest it was declared to have. Callers that must know which blob
   * is bad (to drop a cached copy, or to report the mismatch over whatever a reader tripped on) read this.
   */
  digest?: string;
  cause?: unknown;
}

export class StagedrootError extends Error {
  readonly code: ErrorCode;
  readonly path?: string;
  readonly resolvedPath?: string;
  readonly option?: string;
  readonly value?: unknown;
  readonly issues: Issue[];
  readonly errno?: string;
  readonly digest?: string;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'StagedrootError';
    this.code = code;
    this.path = details.path;
    this.resolvedPath = details.resolvedPath;
    this.option = details.option;
    this.value = details.value;
    this.issues = details.issues ?? [];
    this.errno = details.errno;
    this.digest = details.digest;
  }

  /** True when the update was rejected (exit 3): nothing changed but the failure record. */
  get isRejection(): boolean {
    return REJECTION_CODES.has(this.code);
  }

  toJSON(): Record<string, unknown> {
    return {
      code: this.code,
      message: this.message,
      ...(this.path === undefined ? {} : { path: this.path }),
      ...(this.errno === undefined ? {} : { errno: this.errno }),
      ...(this.issues.length ? { issues: this.issues } : {}),
    };
  }
}

export function isStagedrootError(err: unknown, code?: ErrorCode): err is StagedrootError {
  return err instanceof StagedrootError && (code === undefined || err.code === code);
}

/** The errno code of a Node system error, if any. */
export function errnoOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

/**
 * The one field-path style for documents (zod-like): `storage.files[2].contents.source`.
 * Numbers are list indexes; a key that is not a plain identifier is quoted
 * (`units["a b"]`), so every path reads back to exactly one field.
 */
export function fieldPath(parts: readonly PropertyKey[]): string {
  let out = '';
  for (const k of parts) {
    if (typeof k === 'number') out += `[${k}]`;
    else if (typeof k === 'string' && /^[A-Za-z_$][\w$-]*$/.test(k)) out += out === '' ? k : `.${k}`;
    else out += `[${JSON.stringify(String(k))}]`;
  }
  return out;
}

/** Formats issues for people, one per line (a pure function, like zod's formatter). */
export function formatIssues(issues: readonly Issue[]): string {
  return issues.map((i) => `  ${i.severity === 'warning' ? 'warning' : 'error'} ${i.code} at ${i.path || '(root)'}: ${i.message}`).join('\n');
}

/** Graver first: a bomb outranks an escape, a corrupt source, an unsupported field, a malformed one. */
const PRECEDENCE: ErrorCode[] = ['UNSAFE_ENTRY', 'PATH_ESCAPE', 'SOURCE_CORRUPT', 'SOURCE_UNSUPPORTED', 'SPEC_INVALID', 'APPLY_FAILED'];

/**
 * One error for the problems collected in a document or a tree (each issue's `code` is the
 * error code it stands for; the error takes the gravest): "`what`: N problems:" and the
 * formatted list. Warnings in the list are carried along but do not choose the code.
 */
export function issuesError(issues: readonly Issue[], what: string): StagedrootError {
  const errors = issues.filter((i) => i.severity === 'error');
  const code = PRECEDENCE.find((c) => errors.some((i) => i.code === c)) ?? 'SPEC_INVALID';
  const n = errors.length;
  return new StagedrootError(code, `${what}: ${n} problem${n === 1 ? '' : 's'}:\n${formatIssues(errors)}`, { issues: [...issues], path: errors[0]?.path });
}
