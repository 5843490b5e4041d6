import { z } from 'zod';
import { issuesError } from '../errors.js';
import { zodIssues } from './document.js';
import { bytes, type ChangeOp, type ChangeSet } from '../changeset.js';
import { normalizeTreePath } from '../fs/core/paths.js';
import { kernelArgumentProblem } from '../state/kernel-args.js';
import type { Source } from './source.js';

/**
 * The native update spec: a JSON document, every field checked, unknown fields
 * rejected. Applied in this order: removals, directories, files, symlinks, hardlinks.
 *
 *   { "version": 1, "label": "web-2",
 *     "files": [{ "path": "/etc/motd", "contents": "hi\n", "mode": "0644" },
 *               { "path": "/etc/key", "contents": { "base64": "AAEC" }, "mode": 384, "uid": 0, "gid": 0 }],
 *     "directories": [{ "path": "/srv/www", "mode": "0755" }],
 *     "symlinks": [{ "path": "/etc/localtime", "target": "/usr/share/zoneinfo/UTC" }],
 *     "hardlinks": [{ "path": "/usr/bin/b", "target": "/usr/bin/a" }],
 *     "remove": ["/etc/old.conf", { "path": "/var/cache/x", "recursive": true }] }
 */
const modeSchema = z.union([
  z.number().int().min(0).max(0o7777),
  z.string().regex(/^0?[0-7]{3,4}$/, 'an octal mode such as "0644"').transform((s) => parseInt(s, 8)),
]);
const idSchema = z.number().int().min(0).max(0xfffffffe);
const pathSchema = z.string().min(1).refine((p) => {
  try {
    normalizeTreePath(p);
    return true;
  } catch {
    return false;
  }
}, 'a path inside the root, without ".." components, NUL bytes or backslashes');

const contentsSchema = z.union([z.string(), z.object({ base64: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'base64 data') }).strict()]);

const fileSchema = z
  .object({
    path: pathSchema,
    contents: contentsSchema,
    mode: modeSchema.optional(),
    uid: idSchema.optional(),
    gid: idSchema.optional(),
    overwrite: z.boolean().optional(),
    append: z.boolean().optional(),
  })
  .strict();

const dirSchema = z.object({ path: pathSchema, mode: modeSchema.optional(), uid: idSchema.optional(), gid: idSchema.optional() }).strict();
const linkSchema = z.object({ path: pathSchema, target: z.string().min(1), overwrite: z.boolean().optional() }).strict();
const hardlinkSchema = z.object({ path: pathSchema, target: pathSchema, overwrite: z.boolean().optional() }).strict();
const removeSchema = z.union([
  pathSchema.transform((path) => ({ path, recursive: false, missingOk: false })),
  z.object({ path: pathSchema, recursive: z.boolean().default(false), missingOk: z.boolean().default(false) }).strict(),
]);

const kernelArgSchema = z.string().superRefine((a, ctx) => {
  const problem = kernelArgumentProblem(a);
  if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
});
export const kernelArgumentsSchema = z.object({ shouldExist: z.array(kernelArgSchema).optional(), shouldNotExist: z.array(kernelArgSchema).optional() }).strict();

export const updateSpecSchema = z
  .object({
    version: z.literal(1).optional(),
    label: z.string().min(1).max(200).optional(),
    files: z.array(fileSchema).default([]),
    directories: z.array(dirSchema).default([]),
    symlinks: z.array(linkSchema).default([]),
    hardlinks: z.array(hardlinkSchema).default([]),
    remove: z.array(removeSchema).default([]),
    /** Kernel arguments of the new deployment: its parent's, with these changes. */
    kernelArguments: kernelArgumentsSchema.optional(),
  })
  .strict();

export type UpdateSpec = z.input<typeof updateSpecSchema>;

/** Parses and checks a spec document; every bad field is listed in the error's issues. */
export function parseUpdateSpec(doc: unknown, where = 'update spec'): z.output<typeof updateSpecSchema> {
  const r = updateSpecSchema.safeParse(doc);
  if (!r.success) throw issuesError(zodIssues(r.error), `The ${where} is invalid`);
  return r.data;
}

export function specToChangeSet(spec: z.output<typeof updateSpecSchema>, describe: string): ChangeSet {
  const ops: ChangeOp[] = [];
  for (const r of spec.remove) ops.push({ op: 'remove', path: normalizeTreePath(r.path), recursive: r.recursive, missingOk: r.missingOk });
  for (const d of spec.directories) ops.push({ op: 'mkdir', path: normalizeTreePath(d.path), mode: d.mode, uid: d.uid, gid: d.gid });
  for (const f of spec.files) {
    const data = typeof f.contents === 'string' ? bytes(f.contents) : bytes(Buffer.from(f.contents.base64, 'base64'));
    ops.push({ op: 'write', path: normalizeTreePath(f.path), content: data, mode: f.mode, uid: f.uid, gid: f.gid, overwrite: f.overwrite, append: f.append });
  }
  for (const l of spec.symlinks) ops.push({ op: 'symlink', path: normalizeTreePath(l.path), target: l.target, overwrite: l.overwrite });
  for (const h of spec.hardlinks) ops.push({ op: 'hardlink', path: normalizeTreePath(h.path), target: normalizeTreePath(h.target), overwrite: h.overwrite });
  const n = spec.files.length + spec.directories.length + spec.symlinks.length + spec.hardlinks.length + spec.remove.length;
  const kargs = spec.kernelArguments;
  const k = (kargs?.shouldExist?.length ?? 0) + (kargs?.shouldNotExist?.length ?? 0);
  return { description: `${describe}: ${n} change${n === 1 ? '' : 's'}${k ? `, ${k} kernel argument change${k === 1 ? '' : 's'}` : ''}`, label: spec.label, ops, count: ops.length, sharedContent: 'desired', ...(kargs ? { kernelArguments: kargs } : {}) };
}

/** A source from a spec object already in memory (library users, tests). */
export function specSource(doc: unknown, describe = 'update spec'): Source {
  return {
    kind: 'spec',
    describe,
    async plan() {
      return specToChangeSet(parseUpdateSpec(doc, describe), describe);
    },
  };
}
