import type { Command } from 'commander';
import { pathSource } from '../../sources/detect.js';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';
import { progressBar } from '../progress.js';

export function stageCommand(program: Command, env: CliEnv): void {
  common(program.command('stage'))
    .description('stage an update (a spec, Ignition config, tar layer or directory; kind detected from its content)')
    .argument('<source>', 'file or directory to stage')
    .option('--label <label>', 'a label for the new deployment')
    .option('--lock', 'finalization lock: stage now, but finalize leaves it in place until `unlock`')
    .option('--copy', 'copy the non-usr/ part of the tree instead of reflinking it')
    .option('--replace', 'a tar or directory source is the whole new tree, not a layer over the booted one')
    .action(
      action(env, async (path: string, o: CommonOptions & { label?: string; lock?: boolean; copy?: boolean; replace?: boolean }) => {
        const source = pathSource(path, { replace: o.replace });
        const s = await openSysroot(env, o);
        const bar = progressBar(env.io);
        try {
          const r = await s.stage(source, { label: o.label, lock: o.lock, onProgress: bar.update, copyPolicy: o.copy ? { mode: 'copy' } : undefined });
          bar.done();
          if (o.json) printJson(env.io, { ok: true, ...r });
          else {
            env.io.out(`staged deployment ${r.id} (${r.label}): ${r.delta.length} path${r.delta.length === 1 ? '' : 's'} changed; it becomes current at the next reboot\n`);
            for (const w of r.warnings) env.io.err(`stagedroot: warning: ${w.code} at ${w.path}: ${w.message}\n`);
          }
        } finally {
          bar.done();
        }
      }),
    );
}
