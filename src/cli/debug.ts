/** Whether stacks of unexpected errors are wanted: STAGEDROOT_DEBUG set (not "" or "0"), or --debug on the command line before `--`. */
export function debugFlagged(env: NodeJS.ProcessEnv, argv: readonly string[] = []): boolean {
  const v = env.STAGEDROOT_DEBUG;
  if (v !== undefined && v !== '' && v !== '0') return true;
  const end = argv.indexOf('--');
  return argv.some((a, i) => a === '--debug' && (end === -1 || i < end));
}
