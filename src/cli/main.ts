#!/usr/bin/env node
import { faultHookFromEnv } from '../fs/core/faults.js';
import { processIo } from './io.js';
import { runCli } from './program.js';

// Fault knobs are read here, at the entry, never at import time (crash tests set them).
const code = await runCli(process.argv.slice(2), processIo, faultHookFromEnv(process.env));
process.exitCode = code;
