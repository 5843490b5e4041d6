import * as fs from 'node:fs';
import * as path from 'node:path';
import { execa, execaSync, type Options, type SyncOptions } from 'execa';

const SETUP = path.resolve(import.meta.dirname, '../../scripts/test-setup.sh');

/** Command → Debian package, from the `cmd COMMAND PACKAGE` lines of scripts/test-setup.sh (the one list). */
export function toolPackages(): Map<string, string> {
  const map = new Map<string, string>();
  for (const m of fs.readFileSync(SETUP, 'utf8').matchAll(/^cmd (\S+) (\S+)$/gm)) map.set(m[1]!, m[2]!);
  return map;
}

/** The error for a tool that is not installed: names its Debian package and the script that installs it. */
export function missingTool(command: string): Error {
  const pkg = toolPackages().get(command);
  const what = pkg ? `Debian package ${pkg}` : 'no package in scripts/test-setup.sh: add its line there';
  return new Error(`${command} is not installed (${what}); run scripts/test-setup.sh as root to install the tests' tools`);
}

const isEnoent = (err: unknown): boolean => (err as { code?: string }).code === 'ENOENT';

/** Runs a host tool for a test (execa); a tool that is not installed fails naming its package, not with ENOENT. */
export async function tool(command: string, args: readonly string[] = [], options: Options = {}) {
  try {
    const r = await execa(command, args, options);
    // With reject: false execa returns the spawn failure instead of throwing it.
    if (isEnoent(r)) throw missingTool(command);
    return r;
  } catch (err) {
    if (isEnoent(err)) throw missingTool(command);
    throw err;
  }
}

/** The synchronous twin of `tool`. */
export function toolSync(command: string, args: readonly string[] = [], options: SyncOptions = {}) {
  try {
    const r = execaSync(command, args, options);
    if (isEnoent(r)) throw missingTool(command);
    return r;
  } catch (err) {
    if (isEnoent(err)) throw missingTool(command);
    throw err;
  }
}
