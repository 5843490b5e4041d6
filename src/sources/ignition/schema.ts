import { z } from 'zod';
import { kernelArgumentsSchema } from '../spec.js';
import { MAX_PATH_DEPTH, splitSourcePath } from '../../fs/core/paths.js';
import { dropinNameProblem, unitNameProblem } from '../../systemd/unit-names.js';

/**
 * The subset of the Ignition v3 configuration (specs 3.0.0–3.6.0,
 * https://coreos.github.io/ignition/configuration-v3_6/) that stagedroot applies: the
 * fields the machine-config-daemon uses. Fields outside it are refused earlier, by
 * `findUnsupported`, with their paths; this schema checks the values of the rest. Every
 * object is strict, so nothing slips through unread.
 */
export const SUPPORTED_VERSIONS = ['3.0.0', '3.1.0', '3.2.0', '3.3.0', '3.4.0', '3.5.0', '3.6.0'] as const;
export type IgnitionVersion = (typeof SUPPORTED_VERSIONS)[number];

/** An absolute path inside the root: no "..", NUL or backslash; not the root itself. */
const pathSchema = z.string().superRefine((p, ctx) => {
  if (!p.startsWith('/')) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be an absolute path, got ${JSON.stringify(p)}` });
    return;
  }
  try {
    const depth = splitSourcePath(p).length;
    if (depth > MAX_PATH_DEPTH) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `the path is ${depth} components deep (limit ${MAX_PATH_DEPTH})`, params: { code: 'UNSAFE_ENTRY' } });
  } catch (err) {
    const escape = p.split('/').includes('..');
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: (err as Error).message, params: { code: escape ? 'PATH_ESCAPE' : 'SPEC_INVALID' } });
  }
});

// Modes are decimal integers in Ignition JSON (0644 is written 420).
const modeSchema = z.number().int().min(0).max(0o7777);
const idSchema = z.number().int().min(0).max(0xfffffffe);

const ownerSchema = z
  .object({ id: idSchema.optional(), name: z.string().min(1).optional() })
  .strict()
  .refine((o) => o.id === undefined || o.name === undefined, 'id and name are mutually exclusive');

const hashSchema = z
  .string()
  .regex(/^(sha512-[0-9a-fA-F]{128}|sha256-[0-9a-fA-F]{64})$/, 'a hash of the form sha512-<128 hex digits> or sha256-<64 hex digits>');

const resourceSchema = z
  .object({
    source: z.string().optional(),
    compression: z.enum(['', 'gzip']).optional(),
    verification: z.object({ hash: hashSchema.optional() }).strict().optional(),
  })
  .strict();

const fileSchema = z
  .object({
    path: pathSchema,
    overwrite: z.boolean().optional(),
    contents: resourceSchema.optional(),
    append: z.array(resourceSchema).optional(),
    mode: modeSchema.optional(),
    user: ownerSchema.optional(),
    group: ownerSchema.optional(),
  })
  .strict()
  .superRefine((f, ctx) => {
    if (f.overwrite === true && f.contents?.source === undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['contents', 'source'], message: 'contents.source must be given when overwrite is true' });
    }
  });

const directorySchema = z
  .object({ path: pathSchema, overwrite: z.boolean().optional(), mode: modeSchema.optional(), user: ownerSchema.optional(), group: ownerSchema.optional() })
  .strict();

const linkSchema = z
  .object({
    path: pathSchema,
    overwrite: z.boolean().optional(),
    user: ownerSchema.optional(),
    group: ownerSchema.optional(),
    target: z.string().min(1).refine((t) => !t.includes('\0'), 'a link target must not contain NUL bytes'),
    hard: z.boolean().optional(),
  })
  .strict()
  .superRefine((l, ctx) => {
    if (l.hard !== true) return;
    const r = pathSchema.safeParse(l.target);
    if (!r.success) for (const i of r.error.issues) ctx.addIssue({ ...i, path: ['target'], message: `a hard link target ${i.message}` });
  });

const nameCheck = (problem: (n: string) => string | null) =>
  z.string().superRefine((n, ctx) => {
    const p = problem(n);
    if (p !== null) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `${p} (got ${JSON.stringify(n)})` });
  });

const unitSchema = z
  .object({
    name: nameCheck(unitNameProblem),
    enabled: z.boolean().optional(),
    mask: z.boolean().optional(),
    contents: z.string().optional(),
    dropins: z.array(z.object({ name: nameCheck(dropinNameProblem), contents: z.string().optional() }).strict()).optional(),
  })
  .strict()
  .superRefine((u, ctx) => {
    if (u.mask === true && u.enabled === true) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['enabled'], message: 'a masked unit cannot be enabled' });
  });

const userSchema = z
  .object({
    name: z.string().min(1).regex(/^[^:\n/]+$/, 'a user name without ":", "/" or newlines'),
    sshAuthorizedKeys: z.array(z.string().min(1).regex(/^[^\r\n]+$/, 'one key per entry, without newlines')).optional(),
  })
  .strict();

export const ignitionSchema = z
  .object({
    ignition: z.object({ version: z.enum(SUPPORTED_VERSIONS) }).strict(),
    storage: z
      .object({ files: z.array(fileSchema).optional(), directories: z.array(directorySchema).optional(), links: z.array(linkSchema).optional() })
      .strict()
      .optional(),
    systemd: z.object({ units: z.array(unitSchema).optional() }).strict().optional(),
    passwd: z.object({ users: z.array(userSchema).optional() }).strict().optional(),
    /** Spec 3.3.0 and later: the new deployment's kernel arguments (checked against the version in plan). */
    kernelArguments: kernelArgumentsSchema.optional(),
  })
  .strict();

export type IgnitionConfig = z.output<typeof ignitionSchema>;
export type IgnitionFile = NonNullable<NonNullable<IgnitionConfig['storage']>['files']>[number];
export type IgnitionDirectory = NonNullable<NonNullable<IgnitionConfig['storage']>['directories']>[number];
export type IgnitionLink = NonNullable<NonNullable<IgnitionConfig['storage']>['links']>[number];
export type IgnitionUnit = NonNullable<NonNullable<IgnitionConfig['systemd']>['units']>[number];
export type IgnitionOwner = z.output<typeof ownerSchema>;
