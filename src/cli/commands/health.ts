import type { Command } from 'commander';
import { assessHealth } from '../../assess-health.js';
import { fleetLockOf, releaseSlot } from '../../agent/fleet-reboot.js';
import { FleetLockError } from '../../fleetlock/client.js';
import type { CheckResult } from '../../boot/health.js';
import { action, collect, common, nonNegativeInt, openSysroot, sysrootDir, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

/** Where checks live when no option names any (a missing directory there means "no checks"). */
export const DEFAULT_HEALTH_DIRS = { required: ['/etc/stagedroot/health/required.d'], wanted: ['/etc/stagedroot/health/wanted.d'] };

interface HealthCliOptions extends CommonOptions {
  requiredDir: string[];
  wantedDir: string[];
  check: string[];
  wantedCheck: string[];
  timeout?: string;
}


export function healthCommand(program: Command, env: CliEnv): void {
  common(program.command('health'))
    .description('boot assessment: run the health checks, then mark the booted deployment good, or bad (rolled back at the next boot)')
    .option('--required-dir <dir>', 'a directory of executables that must all pass (repeatable)', collect, [])
    .option('--wanted-dir <dir>', 'a directory of executables that may fail (repeatable)', collect, [])
    .option('--check <command>', 'a command that must pass (repeatable)', collect, [])
    .option('--wanted-check <command>', 'a command that may fail (repeatable)', collect, [])
    .option('--timeout <seconds>', 'time limit of each check (default 300)')
    .addHelpText('after', `\nWith no check options, runs the executables in ${DEFAULT_HEALTH_DIRS.required[0]} (required) and ${DEFAULT_HEALTH_DIRS.wanted[0]} (wanted), if they exist.\nExit 0: marked good. Exit 1: a required check failed (the deployment is marked bad when it was under assessment).`)
    .action(
      action(env, async (o: HealthCliOptions) => {
        const timeout = nonNegativeInt('timeout', o.timeout);
        const explicit = o.requiredDir.length + o.wantedDir.length + o.check.length + o.wantedCheck.length > 0;
        const s = await openSysroot(env, o);
        const show = (r: CheckResult): void => {
          if (!o.json) env.io.err(`stagedroot: ${r.ok ? 'pass' : r.kind === 'required' ? 'FAIL' : 'warn'} ${r.kind} ${r.name} (${r.outcome}, ${(r.durationMs / 1000).toFixed(1)}s)\n`);
        };
        const r = await assessHealth(s, {
          required: o.check,
          wanted: o.wantedCheck,
          requiredDirs: o.requiredDir,
          wantedDirs: o.wantedDir,
          ...(explicit ? {} : { optionalDirs: DEFAULT_HEALTH_DIRS }),
          ...(timeout === undefined ? {} : { timeoutMs: timeout * 1000 }),
          onResult: show,
        });
        // The boot is good: release this node's FleetLock reboot slot (Zincati's steady state), if coordinated.
        const lock = r.action === 'marked-good' ? fleetLockOf(sysrootDir(env, o)) : null;
        let fleetLock: { released: true } | { released: false; error: { kind: string; value: string; statusCode: number | null } } | undefined;
        if (lock !== null) {
          try {
            await releaseSlot(lock);
            fleetLock = { released: true };
          } catch (err) {
            if (!(err instanceof FleetLockError)) throw err;
            fleetLock = { released: false, error: { kind: err.kind, value: err.description, statusCode: err.statusCode } };
            if (!o.json) env.io.err(`stagedroot: warning: the FleetLock reboot slot was not released (${err.kind}: ${err.description}); the next \`health\` run tries again\n`);
          }
        }
        if (o.json) {
          printJson(env.io, { ok: r.report.ok, action: r.action, results: r.report.results, status: r.status, ...(fleetLock ? { fleetLock } : {}) });
        } else {
          for (const f of [...r.report.failedRequired, ...r.report.failedWanted]) {
            if (f.output.trim()) env.io.err(`--- ${f.kind} check ${f.name} (${f.outcome}) ---\n${f.output.endsWith('\n') ? f.output : f.output + '\n'}`);
          }
          const n = r.report.results.length;
          if (r.action === 'marked-good' && n === 0) env.io.out(`no health checks configured: deployment ${r.status.booted} marked good without an assessment (add checks to ${DEFAULT_HEALTH_DIRS.required[0]})\n`);
          else if (r.action === 'marked-good') env.io.out(`${n} health check${n === 1 ? '' : 's'} passed${r.report.failedWanted.length ? ` (${r.report.failedWanted.length} wanted check(s) failed)` : ''}: deployment ${r.status.booted} marked good\n`);
          else if (r.action === 'marked-bad') env.io.out(`required health check(s) failed: deployment ${r.status.booted} marked bad; deployment ${r.status.current} runs at the next boot (reboot to roll back)\n`);
          else env.io.out(`required health check(s) failed on deployment ${r.status.booted}, which was already marked good: nothing rolled back\n`);
        }
        return r.action === 'marked-good' ? 0 : 1;
      }),
    );
}
