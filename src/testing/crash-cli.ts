#!/usr/bin/env node
/**
 * The CLI for crash tests: the program of `stagedroot`, killed (SIGKILL) after the n-th
 * mutation when STAGEDROOT_FAULT_KILL_AFTER=n. Not a bin of the package: tests run it as
 * `node dist/testing/crash-cli.js ARGS`; the production entry (cli/main.ts) has no fault knob.
 */
import { processIo } from '../cli/io.js';
import { runCli } from '../cli/program.js';
import { faultHookFromEnv } from './faults.js';

process.exitCode = await runCli(process.argv.slice(2), processIo, faultHookFromEnv(process.env));
