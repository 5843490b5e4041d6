// What the VM tests (test/real-boot, test/crash-replay) share: a guest's step script on a
// disk of its own, one qemu run under TCG with the console and the step's results on two
// serial ports, and the "@key value" lines the step reports.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';

/** The step script on its own disk (/dev/vdb in both tests), padded to whole sectors (the guest strips the NULs). */
export function stepDisk(file, script) {
  const body = Buffer.from(`${script}\n`);
  const buf = Buffer.alloc(Math.ceil((body.length + 1) / 4096) * 4096);
  body.copy(buf);
  fs.writeFileSync(file, buf);
}

/**
 * One qemu run (TCG, one CPU, 1 GiB; -no-reboot turns the guest's reboot, a kernel panic
 * included, into an exit) with `args` for the firmware, kernel and disks; the step script
 * written to LOG.step.sh for the caller's disk list, the console to LOG.console.log and
 * the step's reports to LOG.results.log. `killOn`: a result key; when the step reports
 * it, qemu is SIGKILLed (a power cut). Resolves with the results, how the run ended and
 * how long it took.
 */
export function runQemu({ logBase, step, args, timeoutMs, killOn = null }) {
  const stepFile = `${logBase}.step.sh`;
  stepDisk(stepFile, step);
  const consoleLog = `${logBase}.console.log`;
  const resultsLog = `${logBase}.results.log`;
  fs.writeFileSync(resultsLog, '');
  const all = [
    '-accel', 'tcg', '-m', '1024', '-smp', '1', '-no-reboot', '-nodefaults',
    '-display', 'none', '-monitor', 'none',
    '-serial', `file:${consoleLog}`, '-serial', `file:${resultsLog}`,
    ...args(stepFile),
  ];
  const started = Date.now();
  return new Promise((resolve) => {
    const q = spawn('qemu-system-x86_64', all, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    q.stderr.on('data', (c) => (stderr += c));
    let ended = null;
    const timer = setTimeout(() => {
      ended = 'timeout';
      q.kill('SIGKILL');
    }, timeoutMs);
    const poll = killOn
      ? setInterval(() => {
          if (ended === null && parseResults(resultsLog).has(killOn)) {
            ended = 'power-cut';
            q.kill('SIGKILL');
          }
        }, 50)
      : null;
    q.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (poll) clearInterval(poll);
      resolve({
        ended: ended ?? (code === 0 ? 'exited' : `qemu failed (${signal ?? code}): ${stderr.trim()}`),
        seconds: (Date.now() - started) / 1000,
        results: parseResults(resultsLog),
        consoleLog,
        resultsLog,
      });
    });
  });
}

/** Lines "@key value" from the step's serial port (a key seen twice keeps its last value). */
export function parseResults(file) {
  const m = new Map();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const r = /^@([\w.-]+) ?(.*)$/.exec(line.replace(/\r$/, ''));
    if (r) m.set(r[1], r[2]);
  }
  return m;
}
