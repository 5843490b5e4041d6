import { z } from 'zod';

/**
 * What the config a deployment was staged from recorded beside the deployment
 * (deploy/ID/config.json): which config it was, the kernel arguments it added and the
 * paths it owns. The next stage from a config of the same owner reads it to undo what
 * that config no longer asks for, as the machine-config-daemon does between two
 * rendered configs. Pure data.
 */

/** What was at an owned path before the config first wrote it: restored when the config lets the path go. */
export const originalSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('file'), mode: z.number().int(), uid: z.number().int(), gid: z.number().int(), data: z.string() }).strict(),
  z.object({ type: z.literal('symlink'), target: z.string(), uid: z.number().int(), gid: z.number().int() }).strict(),
  z.object({ type: z.literal('directory'), mode: z.number().int(), uid: z.number().int(), gid: z.number().int() }).strict(),
]);
export type Original = z.infer<typeof originalSchema>;

export const OWNED_KINDS = ['file', 'directory', 'link', 'unit', 'dropin', 'enabled'] as const;
export type OwnedKind = (typeof OWNED_KINDS)[number];

export const ownedPathSchema = z
  .object({
    /**
     * Tree-relative path ("etc/chrony.conf"); for `enabled`, the unit's name
     * ("kubelet.service"): the links enabling it are the config's.
     */
    path: z.string(),
    kind: z.enum(OWNED_KINDS),
    /**
     * The base image's version, taken from the tree the config was first applied over
     * (null: the path was not there, so letting it go deletes it). For `enabled`: whether
     * the unit was already enabled there (then letting it go leaves it enabled).
     */
    original: originalSchema.nullable(),
    wasEnabled: z.boolean().optional(),
  })
  .strict();
export type OwnedPath = z.infer<typeof ownedPathSchema>;

export const configRecordSchema = z
  .object({
    version: z.literal(1),
    /** What kind of config: a MachineConfig or a plain Ignition config. */
    kind: z.enum(['machine-config', 'ignition']),
    /** Configs of one owner replace each other's paths (default: the kind). */
    owner: z.string().min(1),
    /** The config's name (a MachineConfig's metadata.name, else the source). */
    name: z.string(),
    /** The kernel arguments the config added (a MachineConfig's spec.kernelArguments, split). */
    kernelArguments: z.array(z.string()),
    /** The paths the config owns in this deployment. */
    owned: z.array(ownedPathSchema),
    /** A MachineConfig's spec.osImageURL, when it named one. */
    osImageURL: z.string().optional(),
  })
  .strict();
export type ConfigRecord = z.infer<typeof configRecordSchema>;
