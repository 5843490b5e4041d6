import { z } from 'zod';
import { activationSchema, policyActionSchema } from './activation.js';

/** Zod schemas of everything stagedroot writes and reads back in a sysroot. */

export const deploymentIdSchema = z.string().regex(/^\d{4,}$/, 'a deployment id is four or more digits');

export const issueSchema = z
  .object({
    code: z.string(),
    path: z.string(),
    message: z.string(),
    severity: z.enum(['error', 'warning']),
  })
  .strict();

/**
 * The steps of a stage, in order: plan the changes (the source reads its input), copy the
 * base tree, apply the changes, write the manifest, validate (the free-space preflight,
 * run before the copy, is a built-in check and counts as validate), sync, commit (the
 * tree moves into deploy/ and the state names it staged). A failed stage records the
 * step that failed in `step`.
 */
export const STAGE_PHASES = ['plan', 'copy', 'apply', 'manifest', 'validate', 'sync', 'commit'] as const;
export type StagePhase = (typeof STAGE_PHASES)[number];

/**
 * Where a failure happened, in the public contract's words: `apply` (the update could
 * not be built: every stage step but validate), `validate`, `finalize`, `boot` (tries used
 * up), `health` (boot assessment) or `apply-live` (a live apply undone). Agents switch on these; the finer stage step is `step`.
 */
export const phaseSchema = z.enum(['apply', 'validate', 'finalize', 'boot', 'health', 'apply-live']);

/** The contract phase a stage step is reported under. */
export function phaseOfStep(step: StagePhase): 'apply' | 'validate' {
  return step === 'validate' ? 'validate' : 'apply';
}
export type Phase = z.infer<typeof phaseSchema>;

export const failureSchema = z
  .object({
    id: deploymentIdSchema,
    label: z.string(),
    phase: phaseSchema,
    /** The stage step that failed (plan, copy, apply, manifest, validate, sync, commit), for a failed stage. */
    step: z.enum(STAGE_PHASES).optional(),
    reason: z.string(),
    at: z.string(),
    code: z.string().optional(),
    path: z.string().optional(),
    issues: z.array(issueSchema).optional(),
    /** Output captured from a command validator or health check (bounded). */
    output: z.string().optional(),
  })
  .strict();
export type Failure = z.infer<typeof failureSchema>;

/** How a deployment became current without a reboot (apply-live). */
export const liveAppliedSchema = z
  .object({
    at: z.string(),
    /** The deployment that was running (and whose tree the files were written into). */
    from: deploymentIdSchema,
    actions: z.array(policyActionSchema),
    /** Paths written or removed in the running root. */
    paths: z.number().int().min(0),
  })
  .strict();
export type LiveApplied = z.infer<typeof liveAppliedSchema>;

/** What an image deployment was built from: `status --json` shows it per deployment. */
export const originSchema = z
  .object({
    kind: z.literal('oci-image'),
    /** The image manifest's digest ("sha256:..."): the same digest is the same image. */
    digest: z.string(),
    mediaType: z.string(),
    /** The config's labels (org.opencontainers.image.version, ...). */
    labels: z.record(z.string()),
    /** The index's `org.opencontainers.image.ref.name` of the selected manifest, if any. */
    ref: z.string().optional(),
    /** os/architecture[/variant] of the selected manifest. */
    platform: z.string().optional(),
    /** An image pulled from a registry: its reference as given, normalised (HOST/REPO:TAG or HOST/REPO@DIGEST). */
    pullspec: z.string().optional(),
    /** The registry that served it (https://HOST[:PORT]). */
    registry: z.string().optional(),
    /** The registries.conf mirror that served it, as HOST/REPO (`registry` is then the mirror's origin). */
    mirror: z.string().optional(),
    /** The index the pullspec resolved to, when it named one (`digest` is then the platform's manifest in it). */
    indexDigest: z.string().optional(),
    /**
     * The paths of the pull's options it was staged with (absolute; never what the files
     * hold), given again by `upgrade` when it is not given them: --authfile, --certs-dir,
     * --blob-dir, --registries-conf.
     */
    pulledWith: z
      .object({ authfile: z.string().optional(), certsDir: z.string().optional(), blobDir: z.string().optional(), registriesConf: z.string().optional() })
      .strict()
      .optional(),
    /** The diff_ids of its layers, bottom first, as the layer store keeps them (a deployment linked from the store). */
    layers: z.array(z.string()).optional(),
  })
  .strict();
export type Origin = z.infer<typeof originSchema>;

/** The detached signature a deployment's source was verified with. */
export const signatureRecordSchema = z
  .object({
    keyId: z.string(),
    algorithm: z.enum(['ED', 'Ed']),
    /** The signed trusted comment (null for signify signatures). */
    trustedComment: z.string().nullable(),
  })
  .strict();
export type SignatureRecord = z.infer<typeof signatureRecordSchema>;

export const deploymentRecordSchema = z
  .object({
    id: deploymentIdSchema,
    label: z.string(),
    createdAt: z.string(),
    /** The deployment this one was built from. */
    parent: deploymentIdSchema.nullable(),
    /** ready: complete and valid; failed: kept for diagnosis, never booted by stagedroot. */
    status: z.enum(['ready', 'failed']),
    /** Booted and marked good at least once. */
    good: z.boolean(),
    /** Boot tries left while under assessment (null when not being assessed). */
    triesLeft: z.number().int().min(0).nullable(),
    pinned: z.boolean(),
    /** Finalization lock: finalize leaves a locked staged deployment in place. */
    locked: z.boolean().default(false),
    entries: z.number().int().min(0),
    bytes: z.number().min(0),
    /** sha256 of the manifest file, checked before finalize trusts it. */
    manifestSha256: z.string().nullable(),
    source: z.string().optional(),
    origin: originSchema.optional(),
    signature: signatureRecordSchema.optional(),
    failure: failureSchema.nullable(),
    /**
     * How it was last marked good: by `health` with this many checks (0: none were
     * configured, so reaching the health service was all it took), or null by `mark-good`.
     */
    healthChecks: z.number().int().min(0).nullable().optional(),
    /** Its kernel command line arguments (its parent's, changed by its update); absent: none. */
    kernelArguments: z.array(z.string()).optional(),
    /** How it can become active against the deployment it was built from: live (the policy's actions) or at a reboot. */
    activation: activationSchema.optional(),
    /** It became current without a reboot (apply-live): when, from which running deployment, with which actions. */
    liveApplied: liveAppliedSchema.optional(),
  })
  .strict();
export type DeploymentRecord = z.infer<typeof deploymentRecordSchema>;

/** One path the /etc merge (or a shared-directory update) settled for the update, the local version kept aside. */
export const mergeConflictSchema = z
  .object({
    /** Tree-relative path ("etc/x"), as in `diff`. */
    path: z.string(),
    /** Where the local version was kept, relative to the sysroot (null when the local change was a deletion). */
    kept: z.string().nullable(),
  })
  .strict();

/** What the last finalize merged: local changes carried into the new deployment, conflicts kept aside. */
export const mergeReportSchema = z
  .object({
    /** The deployment the merge went into. */
    id: deploymentIdSchema,
    at: z.string(),
    /** Local changes carried (paths the new deployment took from the running system). */
    carried: z.number().int().min(0),
    conflicts: z.array(mergeConflictSchema),
  })
  .strict();
export type MergeReport = z.infer<typeof mergeReportSchema>;

const pointerFields = {
  /** What the `current` symlink points to (the symlink is authoritative; recovery reconciles). */
  current: deploymentIdSchema,
  booted: deploymentIdSchema.nullable(),
  staged: deploymentIdSchema.nullable(),
  rollback: deploymentIdSchema.nullable(),
};

export const baseStateSchema = z
  .object({
    version: z.literal(1),
    ...pointerFields,
    lastFailure: failureSchema.nullable(),
    /** A finalize that failed, surfaced by the next boot (like ostree's finalize-failure stamp). */
    finalizeFailure: failureSchema.extend({ reported: z.boolean() }).strict().nullable(),
    /** Boot tries a newly finalized deployment starts with. */
    bootTries: z.number().int().min(1).max(100),
    /** The highest deployment id ever handed out: ids are never reused, even after discard or prune. */
    lastId: z.string().regex(/^\d+$/).default('0000'),
    /** Where Boot Loader Specification entries are written (`init --boot-dir`); absent: none, the initramfs follows `current`. */
    bootDir: z.string().optional(),
    /**
     * The form the entries take in bootDir (absent: `bls`): `bls` (loader/entries swapped
     * by a symlink, for GRUB with blscfg), `systemd-boot` (plain files on the ESP), `grub`
     * (bootDir is GRUB's directory; stagedroot.cfg beside grub.cfg, for GRUB without blscfg).
     */
    bootLoader: z.enum(['bls', 'systemd-boot', 'grub']).optional(),
    /**
     * bootDir relative to the sysroot (`../boot/grub`), when it is on the sysroot's
     * filesystem: the relation holds wherever that filesystem is mounted, before the first
     * boot under stagedroot (/stagedroot, /boot/grub) and after it (/sysroot/stagedroot,
     * /sysroot/boot/grub; the booted tree's own /boot is a copy nothing reads). Absent:
     * bootDir is on another filesystem (an ESP, a /boot partition), mounted at the same
     * place in every deployment, and bootDir is used as it is.
     */
    bootDirFromSysroot: z.string().optional(),
    /** Read only (written before bootDirFromSysroot): bootDir's path on the sysroot's filesystem, found through that filesystem's mount. */
    bootDirOnSysrootFs: z.string().optional(),
    /**
     * The booted deployment was picked at boot by an entry that is not current's (an older
     * entry chosen in the boot menu, `grub-reboot`, `bootctl set-oneshot`): a choice, not a
     * failure; current is unchanged and the next default boot runs it.
     */
    bootedByChoice: z.boolean().optional(),
    deployments: z.array(deploymentRecordSchema),
    /**
     * Shared directories (tree-relative, e.g. "var"): one copy each under shared/, bound
     * into whichever deployment boots. Absent in a sysroot made before they existed
     * (`open` upgrades it).
     */
    shared: z.array(z.string()).optional(),
    /** Directories whose local changes finalize merges into the new deployment (default ["etc"]). */
    merged: z.array(z.string()).optional(),
    lastMerge: mergeReportSchema.nullable().optional(),
    /**
     * A finalize whose pointer swap happened but whose last steps (the update's entries
     * under shared directories, the kept copies moved into place) may not have: recovery
     * completes them.
     */
    finishPending: deploymentIdSchema.nullable().optional(),
    /**
     * A deployment made current by apply-live while `runningIn`'s tree is still the running
     * root: the /etc edits made there since are carried into it at the next finalize
     * (shutdown) or, after a crash that skipped it, at the next boot; then this is cleared.
     */
    activeLive: z.object({ deployment: deploymentIdSchema, runningIn: deploymentIdSchema }).strict().nullable().optional(),
  })
  .strict();

export const stateSchema = baseStateSchema
  .extend({
    /**
     * A pointer swap in progress: `next` is the state after the `current` symlink points
     * at `next.current`. Whoever reads the state resolves it by looking at the symlink.
     */
    intent: z
      .object({ op: z.string(), next: baseStateSchema })
      .strict()
      .nullable(),
  })
  .strict();

export type BaseState = z.infer<typeof baseStateSchema>;
export type State = z.infer<typeof stateSchema>;
