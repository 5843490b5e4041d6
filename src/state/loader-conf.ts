/**
 * systemd-boot's loader/loader.conf with stagedroot's entries as the default. Pure text.
 *
 * systemd-boot sorts entries by `sort-key` first (ascending), so the distribution's own
 * entries (kernel-install writes `sort-key debian`, `fedora`, …) come before stagedroot's
 * (`sort-key stagedroot`) and, with no `default`, one of them boots: the distribution's
 * copy of a kernel with whatever deployment is current, the pairing the entries exist to
 * prevent. `default stagedroot-*` picks the first stagedroot entry in systemd-boot's order:
 * the highest version, which is current (the entry writer keeps it so at every step).
 * The admin's other settings (timeout, console-mode, editor…) are kept; a `default` of
 * theirs is replaced. An EFI variable set with `bootctl set-default` still overrides it,
 * and `bootctl set-oneshot` still picks one boot.
 */
export const LOADER_CONF = 'loader/loader.conf';
export const LOADER_DEFAULT = 'default stagedroot-*';

/** `text` (the current loader.conf, or null when there is none) with stagedroot's default. */
export function loaderConfWithDefault(text: string | null): string {
  const kept = (text ?? '').split('\n').filter((l) => !/^\s*default(\s|$)/.test(l));
  while (kept.length > 0 && kept.at(-1)!.trim() === '') kept.pop();
  return [...kept, LOADER_DEFAULT].join('\n') + '\n';
}
