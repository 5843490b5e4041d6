import type { Issue } from '../errors.js';
import { runBuiltins, type ResolvedBuiltins } from './builtins.js';
import { runCommandValidators, type PlannedValidator } from './command-validators.js';
import { runValidators } from './run-validators.js';
import type { ValidationContext, Validator } from './types.js';

/** All of a stage's validation: built-ins, then command validators, then the caller's functions. */
export async function validateTree(
  ctx: ValidationContext,
  o: { builtins: ResolvedBuiltins; commands?: readonly PlannedValidator[]; validators?: readonly Validator[] },
): Promise<{ issues: Issue[]; output?: string }> {
  const issues = await runBuiltins(o.builtins, ctx);
  const cmd = await runCommandValidators(o.commands ?? [], ctx);
  const user = await runValidators(o.validators ?? [], ctx);
  return { issues: [...issues, ...cmd.issues, ...user.issues], ...(cmd.output === undefined ? {} : { output: cmd.output }) };
}
