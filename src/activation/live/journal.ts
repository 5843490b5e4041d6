import * as path from 'node:path';
import { z } from 'zod';
import { StagedrootError } from '../../errors.js';
import { parseJsonState } from '../../util/json-state.js';
import type { DurableFs } from '../../fs/trees/durable.js';
import { lstatPath, readText } from '../../fs/core/host-paths.js';
import { hashFile } from '../../fs/core/hash.js';
import { isTreePath, TREE_PATH_RULE } from '../../fs/core/paths.js';
import { policyActionSchema } from '../../state/activation.js';

/*
 * The intent journal of a live apply (issue 31): what the apply will change in the running
 * root, the before-image of every path it touches, the actions it runs in order, and how far
 * it got. It is written durably before the first change, and each progress marker is
 * written durably after the step it marks, so that recovery after a crash knows what may
 * have changed (every entry, once the journal exists) and which services may run the new
 * configuration (the actions up to one past the last marked done).
 *
 * On disk (a directory of the caller's choosing, outside every tree):
 *   journal.json   this record (written temp + fsync + rename + fsync of the directory)
 *   before/N       entry N's before-image: a file's bytes, a symlink, a directory (with
 *                  everything below it when the apply removes or replaces it), each with
 *                  its mode, owner and extended attributes (copyOut, fs/trees/copy-entry.ts)
 */

export const JOURNAL_FILE = 'journal.json';
export const IMAGES_DIR = 'before';

/** A tree path under the root: relative, no empty, `.` or `..` component. */
const treePath = z.string().refine(isTreePath, TREE_PATH_RULE);
const imageName = z.string().regex(/^before\/\d+$/, 'before/N');
const id = z.number().int().nonnegative();
/** An extended attribute: its name and its value in base64 (security.selinux is one of them). */
export const journalXattrSchema = z.object({ name: z.string().min(1), value: z.string() }).strict();
const owner = { uid: id, gid: id, xattrs: z.array(journalXattrSchema) };
const mode = z.number().int().min(0).max(0o7777);

/** What was at a path before the apply: nothing, or an entry whose copy is `image` (beside the journal). */
export const beforeImageSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('absent') }).strict(),
  z.object({ kind: z.literal('file'), mode, ...owner, size: id, sha256: z.string().regex(/^[0-9a-f]{64}$/), image: imageName }).strict(),
  z.object({ kind: z.literal('symlink'), ...owner, target: z.string(), image: imageName }).strict(),
  /** `recursive`: the image holds everything below the directory (the apply removes it or puts a non-directory there). */
  z.object({ kind: z.literal('dir'), mode, ...owner, recursive: z.boolean(), image: imageName }).strict(),
]);
export type BeforeImage = z.infer<typeof beforeImageSchema>;

/** One path the apply changes: `write` copies the staged tree's entry over it, `remove` removes it (and everything below). */
export const journalEntrySchema = z.object({ path: treePath, change: z.enum(['write', 'remove']), before: beforeImageSchema }).strict();
export type JournalEntry = z.infer<typeof journalEntrySchema>;

/** How far the apply got; each marker is written after its step is done. */
export const progressSchema = z
  .object({
    /** Every entry is written (or removed) and labelled. */
    filesWritten: z.boolean(),
    /** The one `systemctl daemon-reload` (when `daemonReload`) returned. */
    daemonReloaded: z.boolean(),
    /** How many of `actions` returned successfully, in order. */
    actionsDone: id,
  })
  .strict();
export type Progress = z.infer<typeof progressSchema>;

export const JOURNAL_VERSION = 1;

export const liveJournalSchema = z
  .object({
    version: z.literal(JOURNAL_VERSION),
    /** The staged deployment being applied. */
    deployment: z.string().min(1),
    /** Host path of the staged deployment's tree (where written entries come from). */
    source: z.string().min(1),
    /** Host path of the running root the apply writes into. */
    root: z.string().min(1),
    /** In the order they are written: a parent before its children. */
    entries: z.array(journalEntrySchema),
    /** One `systemctl daemon-reload` before the actions (units changed). */
    daemonReload: z.boolean(),
    /** The decision's actions, in order (see runnableActions in actions.ts for what each runs). */
    actions: z.array(policyActionSchema),
    /** The service manager's command (["systemctl"] on a host): recovery's undo runs the same. */
    services: z.array(z.string().min(1)).min(1).optional(),
    /** The boot it ran in (/proc/sys/kernel/random/boot_id): after a reboot no service runs the new files, undo restores files only. */
    bootId: z.string().optional(),
    progress: progressSchema,
  })
  .strict()
  .superRefine((j, ctx) => {
    for (const p of progressProblems(j)) ctx.addIssue({ code: z.ZodIssueCode.custom, ...p });
    const seen = new Set<string>();
    j.entries.forEach((e, i) => {
      if (seen.has(e.path)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['entries', i, 'path'], message: `${e.path} listed twice` });
      seen.add(e.path);
    });
  });
export type LiveJournal = z.infer<typeof liveJournalSchema>;

/** What is wrong with a journal's progress against its own actions and daemon-reload (the schema's cross-field rules of `progress`). */
function progressProblems(j: Pick<LiveJournal, 'actions' | 'daemonReload' | 'progress'>): { path: (string | number)[]; message: string }[] {
  const out: { path: (string | number)[]; message: string }[] = [];
  if (j.progress.actionsDone > j.actions.length) out.push({ path: ['progress', 'actionsDone'], message: `more than the ${j.actions.length} actions` });
  if (j.progress.daemonReloaded && !j.progress.filesWritten) out.push({ path: ['progress'], message: 'daemon-reloaded before files-written' });
  if (j.progress.actionsDone > 0 && (!j.progress.filesWritten || (j.daemonReload && !j.progress.daemonReloaded))) out.push({ path: ['progress'], message: 'an action done before the files and the daemon-reload' });
  return out;
}

export const journalFile = (dir: string): string => path.join(dir, JOURNAL_FILE);
/** Host path of an entry's before-image. */
export const imagePath = (dir: string, image: string): string => path.join(dir, image);

function corrupt(file: string, why: string, cause?: unknown): StagedrootError {
  return new StagedrootError('LIVE_JOURNAL_CORRUPT', `The live-apply journal ${file} cannot be trusted: ${why}; nothing was changed`, { path: file, cause });
}

/** Parses a journal's text: anything that is not a whole journal (torn, truncated, edited) is LIVE_JOURNAL_CORRUPT. */
export function parseJournal(text: string, file: string): LiveJournal {
  return parseJsonState(text, file, liveJournalSchema, 'live-apply journal', (p) => (p.kind === 'json' ? corrupt(file, `not valid JSON (${p.detail})`, p.cause) : corrupt(file, `not a live-apply journal: ${p.detail}`)));
}

/**
 * Checks that every before-image the journal names is there whole: of the recorded kind,
 * a file of the recorded size and sha256 (an image is made durable before the journal
 * names it, so anything else is damage, not a crash).
 */
export function checkImages(dir: string, j: LiveJournal): void {
  for (const e of j.entries) {
    const b = e.before;
    if (b.kind === 'absent') continue;
    const host = imagePath(dir, b.image);
    const st = lstatPath(host);
    const kindOk = st !== null && (b.kind === 'file' ? st.isFile() : b.kind === 'dir' ? st.isDirectory() : st.isSymbolicLink());
    if (!kindOk) throw corrupt(journalFile(dir), `the before-image ${b.image} of ${e.path} is ${st === null ? 'missing' : 'not the recorded kind'} (${b.kind})`);
    if (b.kind === 'file' && (st.size !== b.size || hashFile(host) !== b.sha256)) throw corrupt(journalFile(dir), `the before-image ${b.image} of ${e.path} is not the bytes recorded (size ${st.size}, recorded ${b.size})`);
  }
}

/**
 * The journal in `dir` with its before-images checked (checkImages), or null when there is
 * none (no journal.json: an apply that had not yet written its intent, or none at all).
 */
export function readJournal(dir: string): LiveJournal | null {
  const file = journalFile(dir);
  const text = readText(file);
  if (text === null) return null;
  const j = parseJournal(text, file);
  checkImages(dir, j);
  return j;
}

/**
 * What this process wrote of each journal it checked whole, all but its progress (as JSON):
 * a progress marker on a journal whose rest is still that checks only the progress it
 * changes, not every entry again (three markers of the guest's apply-live parsed the whole
 * journal 54 ms, profiled). Compared, not trusted by identity: a journal changed in place
 * since is checked whole.
 */
const checked = new WeakMap<LiveJournal, string>();
const allButProgress = (j: LiveJournal): string => JSON.stringify({ ...j, progress: null });

/** Writes the journal durably (temp + fsync + rename + fsync of the directory), private to root. */
export function writeJournal(dfs: DurableFs, dir: string, j: LiveJournal): void {
  liveJournalSchema.parse(j); // never write what could not be read back
  write(dfs, dir, j, allButProgress(j));
}

/** Writes `j`, whose all-but-progress the caller has made (kept as what was checked). */
function write(dfs: DurableFs, dir: string, j: LiveJournal, rest: string): void {
  dfs.writeFileAtomic(journalFile(dir), JSON.stringify(j) + '\n', 0o600);
  checked.set(j, rest);
}

/**
 * The journal with `progress` advanced, written durably (a progress marker). Returns it.
 * On a journal this process wrote, unchanged but for its progress, only the new progress
 * is checked (the schema's own rules); any other journal is checked whole.
 */
export function markProgress(dfs: DurableFs, dir: string, j: LiveJournal, p: Partial<Progress>): LiveJournal {
  const next = { ...j, progress: { ...j.progress, ...p } };
  const rest = allButProgress(next);
  if (checked.get(j) !== rest) {
    writeJournal(dfs, dir, next);
    return next;
  }
  progressSchema.parse(next.progress);
  const problems = progressProblems(next);
  if (problems.length > 0) throw new z.ZodError(problems.map((q) => ({ code: z.ZodIssueCode.custom, ...q })));
  write(dfs, dir, next, rest);
  return next;
}

export { corrupt as journalCorrupt };
