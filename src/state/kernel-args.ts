/**
 * Kernel arguments as part of a deployment: a new deployment has its parent's, changed
 * the way Ignition's `kernelArguments` and the machine-config-daemon (`rpm-ostree kargs`)
 * change them. Pure data.
 */
export interface KernelArgumentChange {
  /** Arguments that must be present (appended when missing, in this order). */
  shouldExist?: readonly string[];
  /** Arguments that must be absent (every equal occurrence removed). */
  shouldNotExist?: readonly string[];
  /**
   * Declarative arguments (a MachineConfig's, as the machine-config-daemon applies them
   * with `rpm-ostree kargs --delete-if-present=A … --append=B …`): one occurrence of each
   * removed, when present, then these appended in order, duplicates kept as listed.
   */
  deleteIfPresent?: readonly string[];
  append?: readonly string[];
}

/** A kernel argument is one word: no whitespace, no NUL, not empty. */
export function kernelArgumentProblem(arg: string): string | null {
  if (arg === '') return 'an empty kernel argument';
  if (/[\s\0]/.test(arg)) return 'a kernel argument is one word, without whitespace';
  return null;
}

export function applyKernelArguments(parent: readonly string[], change: KernelArgumentChange | undefined): string[] {
  if (!change) return [...parent];
  const gone = new Set(change.shouldNotExist ?? []);
  const out = parent.filter((a) => !gone.has(a));
  for (const a of change.shouldExist ?? []) if (!out.includes(a)) out.push(a);
  for (const a of change.deleteIfPresent ?? []) {
    const at = out.indexOf(a);
    if (at !== -1) out.splice(at, 1);
  }
  out.push(...(change.append ?? []));
  return out;
}
