/**
 * The CLI's verbs, in the help's order: the one list of them. Each row names the
 * command names a module of src/cli/commands/ registers (mark-good and mark-bad share
 * one), the register function it exports, and whether the verb is on the boot path
 * (`boot` and `health` from the units, `mark-good`/`mark-bad` from health or an admin,
 * `status` from agents): the bin (main.ts) runs those from a bundle of their own,
 * dist/cli/boot.cjs, with its own code cache, so that a boot reads, deserializes and
 * evaluates only their modules; every other command line runs from dist/cli/run.cjs.
 *
 * Data only (no import, no code): scripts/build-cli.mjs loads this file itself to write
 * each bundle's import() of the verbs it holds (verb-modules.ts); boot-path.ts and
 * program.ts read it at run time.
 */
export interface VerbEntry {
  /** The command names the module registers. */
  readonly names: readonly string[];
  /** Its module: src/cli/commands/MODULE.ts. */
  readonly module: string;
  /** The function of that module that registers its commands. */
  readonly register: string;
  /** Run from the boot bundle (dist/cli/boot.cjs). */
  readonly bootPath: boolean;
  /** Copies a tree on worker threads (a stage): the bin starts the first worker before it loads the bundle (see fs/jobs/early-worker.ts). */
  readonly treeWork?: boolean;
}

export const VERBS: readonly VerbEntry[] = [
  { names: ['init'], module: 'init', register: 'initCommand', bootPath: false, treeWork: true },
  { names: ['status'], module: 'status', register: 'statusCommand', bootPath: true },
  { names: ['stage'], module: 'stage', register: 'stageCommand', bootPath: false, treeWork: true },
  { names: ['upgrade', 'switch'], module: 'upgrade', register: 'upgradeCommands', bootPath: false, treeWork: true },
  { names: ['finalize'], module: 'finalize', register: 'finalizeCommand', bootPath: false },
  { names: ['apply-live'], module: 'apply-live', register: 'applyLiveCommand', bootPath: false },
  { names: ['boot'], module: 'boot', register: 'bootCommand', bootPath: true },
  { names: ['mark-good', 'mark-bad'], module: 'mark', register: 'markCommands', bootPath: true },
  { names: ['rollback'], module: 'rollback', register: 'rollbackCommand', bootPath: false },
  { names: ['discard'], module: 'discard', register: 'discardCommand', bootPath: false },
  { names: ['prune'], module: 'prune', register: 'pruneCommand', bootPath: false },
  { names: ['diff'], module: 'diff', register: 'diffCommand', bootPath: false },
  { names: ['verify'], module: 'verify', register: 'verifyCommand', bootPath: false },
  { names: ['pin', 'unpin'], module: 'pin', register: 'pinCommands', bootPath: false },
  { names: ['unlock'], module: 'unlock', register: 'unlockCommand', bootPath: false },
  { names: ['health'], module: 'health', register: 'healthCommand', bootPath: true },
  { names: ['trust'], module: 'trust', register: 'trustCommands', bootPath: false },
  { names: ['adopt'], module: 'adopt', register: 'adoptCommand', bootPath: false },
  { names: ['install'], module: 'install', register: 'installCommand', bootPath: false },
  { names: ['reboot', 'fleetlock'], module: 'reboot', register: 'rebootCommand', bootPath: false },
];
