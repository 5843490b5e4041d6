/**
 * The fault hook: every mutating filesystem call in the safe-fs layer reports itself here
 * after it has happened. The hooks that kill or count (crash tests) live in
 * src/testing/faults.ts, out of the product: nothing here can kill the process.
 */
export interface FaultHook {
  /** Called right after each mutating filesystem call, with the call's name and path. */
  afterMutation(op: string, path: string): void;
}

export const noFaults: FaultHook = { afterMutation() {} };
