import { processIo } from './io.js';
import { runCli } from './program.js';

// The CLI bundle's entry (dist/cli/run.cjs, CommonJS: no top-level await). No fault hook
// here: crash tests kill a CLI through src/testing/crash-cli.ts, never this entry.
void runCli(process.argv.slice(2), processIo).then((code) => {
  process.exitCode = code;
});
