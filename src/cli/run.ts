import { processIo } from './io.js';
import { runCli } from './program.js';

// No fault hook here: crash tests kill a CLI through src/testing/crash-cli.ts, never this entry.
const code = await runCli(process.argv.slice(2), processIo);
process.exitCode = code;
