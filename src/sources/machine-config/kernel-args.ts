/**
 * Splits one spec.kernelArguments entry into arguments as the machine-config-daemon does
 * (pkg/daemon/update.go splitKernelArguments, after the kernel's next_arg()): runs of
 * spaces separate arguments, except inside double quotes; quotes cannot be escaped.
 */
export function splitKernelArguments(entry: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < entry.length) {
    while (i < entry.length && isSpace(entry[i]!)) i++;
    const start = i;
    let quoted = false;
    for (; i < entry.length; i++) {
      if (isSpace(entry[i]!) && !quoted) break;
      if (entry[i] === '"') quoted = !quoted;
    }
    if (i > start) out.push(entry.slice(start, i));
  }
  return out;
}

const isSpace = (c: string): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\v' || c === '\f';
