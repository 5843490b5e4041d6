import * as path from 'node:path';
import { z } from 'zod';
import { StagedrootError, fieldPath } from '../errors.js';
import { readJsonState, writeJson, type DurableFs } from '../fs/trees/durable.js';

/** Where a sysroot keeps its FleetLock settings (configured once, used by `reboot` and `health`). */
export const FLEETLOCK_FILE = 'fleetlock.json';

export const fleetLockConfigSchema = z
  .object({
    /** The lock server's base URL; the protocol's endpoints are relative to it (BASE/v1/pre-reboot). */
    url: z.string().refine((u) => {
      try {
        return ['http:', 'https:'].includes(new URL(u).protocol);
      } catch {
        return false;
      }
    }, 'an http:// or https:// URL'),
    /** The reboot group (the protocol's `^[a-zA-Z0-9.-]+$`; Zincati's default is "default"). */
    group: z.string().regex(/^[a-zA-Z0-9.-]+$/, 'letters, digits, "." and "-" (the FleetLock group syntax)'),
    /** This node's lock-holder id (node name or machine id): case-sensitive, non-empty. */
    id: z.string().min(1).max(1024),
    /** Per-request time limit in ms (default 30 s). */
    timeoutMs: z.number().int().min(1).max(3_600_000).optional(),
  })
  .strict();
export type FleetLockConfig = z.infer<typeof fleetLockConfigSchema>;

/** Checks settings given by a caller: a USAGE error naming the field. */
export function checkFleetLockConfig(raw: unknown): FleetLockConfig {
  const r = fleetLockConfigSchema.safeParse(raw);
  if (r.success) return r.data;
  const i = r.error.issues[0]!;
  const option = fieldPath(i.path);
  throw new StagedrootError('USAGE', `Expected the FleetLock ${option || 'settings'} to be ${i.message}`, { option, value: (raw as Record<string, unknown> | null)?.[option] });
}

/** The sysroot's FleetLock settings, or null when none are configured. */
export function readFleetLockConfig(sysroot: string): FleetLockConfig | null {
  return readJsonState(path.join(sysroot, FLEETLOCK_FILE), fleetLockConfigSchema, 'FleetLock settings');
}

/** Writes the settings durably (temp + fsync + rename + fsync of the directory). */
export function writeFleetLockConfig(dfs: DurableFs, sysroot: string, config: FleetLockConfig): void {
  writeJson(dfs, path.join(sysroot, FLEETLOCK_FILE), checkFleetLockConfig(config));
}
