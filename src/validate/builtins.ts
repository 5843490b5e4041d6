import { StagedrootError, type Issue } from '../errors.js';
import { normalizeTreePath } from '../fs/core/paths.js';
import type { FreeSpaceOptions } from './free-space.js';
import { checkRequiredPaths, type RequiredPathsOptions } from './required-paths.js';
import { verifySystemdUnits, type SystemdVerifyOptions } from './systemd-verify.js';
import type { ValidationContext } from './types.js';
import { checkUnsafeModes, type UnsafeModesOptions } from './unsafe-modes.js';
import { checkWantsLinks } from './wants-links.js';

/**
 * The built-in checks, each on by default. `false` switches one off; an object
 * configures it. Set once on the Sysroot (`Sysroot.open(dir, { builtins })`) and/or per
 * stage (`stage(src, { builtins })`, which wins key by key).
 */
export interface BuiltinOptions {
  /** `systemd-analyze verify` of the unit files and drop-ins the update changed. */
  systemdVerify?: boolean | SystemdVerifyOptions;
  /** Dangling links in `*.wants/`, `*.requires/`, `*.upholds/`. */
  wantsLinks?: boolean;
  /** World-writable files under etc/, set-uid/set-gid files outside an allow-list. */
  unsafeModes?: boolean | UnsafeModesOptions;
  /** Paths that must exist (a list, or options; default: etc/os-release when the booted tree has it). */
  requiredPaths?: boolean | readonly string[] | RequiredPathsOptions;
  /** The free-space preflight before the tree is built. */
  freeSpace?: boolean | FreeSpaceOptions;
}

/** Built-in options after defaults: null means switched off. */
export interface ResolvedBuiltins {
  systemdVerify: SystemdVerifyOptions | null;
  wantsLinks: boolean;
  unsafeModes: UnsafeModesOptions | null;
  requiredPaths: RequiredPathsOptions | null;
  freeSpace: FreeSpaceOptions | null;
}

const KEYS = ['systemdVerify', 'wantsLinks', 'unsafeModes', 'requiredPaths', 'freeSpace'] as const;

function onOff<T extends object>(v: boolean | T | undefined, key: string): T | null {
  if (v === undefined || v === true) return {} as T;
  if (v === false) return null;
  if (typeof v !== 'object' || v === null) {
    throw new StagedrootError('USAGE', `Expected \`builtins.${key}\` to be a boolean or an options object, got \`${JSON.stringify(v)}\``, { option: `builtins.${key}`, value: v });
  }
  return v;
}

/** Merges Sysroot-wide and per-stage options, applies defaults, checks them once. */
export function resolveBuiltins(...layers: (BuiltinOptions | undefined)[]): ResolvedBuiltins {
  const merged: BuiltinOptions = Object.assign({}, ...layers.filter(Boolean));
  for (const k of Object.keys(merged)) {
    if (!(KEYS as readonly string[]).includes(k)) {
      throw new StagedrootError('USAGE', `Unknown built-in validator \`builtins.${k}\` (known: ${KEYS.join(', ')})`, { option: `builtins.${k}` });
    }
  }
  const rp = merged.requiredPaths;
  const requiredPaths = Array.isArray(rp) ? { paths: rp as readonly string[] } : onOff<RequiredPathsOptions>(rp as boolean | RequiredPathsOptions | undefined, 'requiredPaths');
  if (requiredPaths?.paths) {
    requiredPaths.paths.forEach((p) => {
      try {
        normalizeTreePath(p, 'required path');
      } catch (err) {
        throw new StagedrootError('USAGE', `Bad required path: ${(err as Error).message}`, { option: 'builtins.requiredPaths', value: p });
      }
    });
  }
  const fs = onOff<FreeSpaceOptions>(merged.freeSpace, 'freeSpace');
  if (fs?.reserveBytes !== undefined && (!Number.isFinite(fs.reserveBytes) || fs.reserveBytes < 0)) {
    throw new StagedrootError('USAGE', `Expected \`builtins.freeSpace.reserveBytes\` to be a non-negative number, got \`${String(fs.reserveBytes)}\``, { option: 'builtins.freeSpace.reserveBytes', value: fs.reserveBytes });
  }
  if (merged.wantsLinks !== undefined && typeof merged.wantsLinks !== 'boolean') {
    throw new StagedrootError('USAGE', `Expected \`builtins.wantsLinks\` to be a boolean, got \`${JSON.stringify(merged.wantsLinks)}\``, { option: 'builtins.wantsLinks', value: merged.wantsLinks });
  }
  return {
    systemdVerify: onOff<SystemdVerifyOptions>(merged.systemdVerify, 'systemdVerify'),
    wantsLinks: merged.wantsLinks ?? true,
    unsafeModes: onOff<UnsafeModesOptions>(merged.unsafeModes, 'unsafeModes'),
    requiredPaths,
    freeSpace: fs,
  };
}

/**
 * Runs the tree checks that are switched on, cheapest first. Returns every issue; lets a
 * TOOL_MISSING error through (the machine lacks a tool: not the update's fault).
 */
export async function runBuiltins(b: ResolvedBuiltins, ctx: ValidationContext): Promise<Issue[]> {
  const issues: Issue[] = [];
  if (b.requiredPaths) issues.push(...checkRequiredPaths(ctx, b.requiredPaths));
  if (b.unsafeModes) issues.push(...checkUnsafeModes(ctx, b.unsafeModes));
  if (b.wantsLinks) issues.push(...checkWantsLinks(ctx));
  if (b.systemdVerify) issues.push(...(await verifySystemdUnits(ctx, b.systemdVerify)));
  return issues;
}
