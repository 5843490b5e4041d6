import type { Verb } from './make-program.js';

// The boot path's verbs (boot-path.ts names them): the boot bundle's whole program, and
// in their places in the full program's list (program.ts).
export const statusVerb: Verb = [['status'], async () => (await import('./commands/status.js')).statusCommand];
export const bootVerb: Verb = [['boot'], async () => (await import('./commands/boot.js')).bootCommand];
export const markVerbs: Verb = [['mark-good', 'mark-bad'], async () => (await import('./commands/mark.js')).markCommands];
export const healthVerb: Verb = [['health'], async () => (await import('./commands/health.js')).healthCommand];

export const BOOT_VERBS: readonly Verb[] = [statusVerb, bootVerb, markVerbs, healthVerb];
