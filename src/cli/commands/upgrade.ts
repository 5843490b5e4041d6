import type { Command } from 'commander';
import { parsePlatform } from '../../sources/oci/platform.js';
import type { RegistrySourceOptions } from '../../sources/registry/source.js';
import type { UpdateCheck, UpdateResult } from '../../stage/track.js';
import type { Sysroot } from '../../sysroot.js';
import { action, common, openSysroot, xattrOption, type CliEnv, type CommonOptions } from '../common.js';
import { formatActivation } from '../format-activation.js';
import { formatCheck } from '../format-pull.js';
import { printJson } from '../io.js';
import { progressBar } from '../progress.js';
import { pullProgress } from '../pull-progress.js';

interface UpdateCliOptions extends CommonOptions {
  check?: boolean;
  label?: string;
  lock?: boolean;
  authfile?: string;
  certsDir?: string;
  blobDir?: string;
  platform?: string;
  registriesConf?: string;
  policy?: string;
  registriesD?: string;
}

/** The options both verbs take (how the image is pulled; the stage's own). */
function updateOptions(cmd: Command): Command {
  return xattrOption(common(cmd))
    .option('--check', 'fetch only the manifests and config and print the digest, the version label, whether there is anything to do, and the layers already present and still needed with their bytes; stage nothing')
    .option('--label <label>', 'a label for the new deployment (default: the image\'s version label)')
    .option('--lock', 'finalization lock: stage now, but finalize leaves it in place until `unlock`')
    .option('--platform <os/arch>', 'the manifest for this platform from an index (default: the tracked deployment\'s, else linux and this host\'s architecture)')
    .option('--authfile <file>', 'the registry credentials (docker config.json format; default: the first of /run/stagedroot/auth.json, /etc/stagedroot/auth.json, /run/ostree/auth.json, /etc/ostree/auth.json, /var/lib/kubelet/config.json)')
    .option('--certs-dir <dir>', 'the registries\' TLS files, HOST[:PORT]/*.crt, *.cert, *.key (default /etc/containers/certs.d)')
    .option('--blob-dir <dir>', 'the OCI layout the image is pulled into, its blobs kept for the next pull (default /var/cache/stagedroot/registry)')
    .option('--registries-conf <file>', 'the registries configuration, read alone (default /etc/containers/registries.conf and registries.conf.d/*.conf): mirrors, blocked and insecure registries')
    .option('--policy <file>', 'the signature policy, containers-policy.json (default /etc/containers/policy.json; none there: every image accepted)')
    .option('--registries-d <dir>', 'where each registry\'s signatures are, registries.d YAML files (default /etc/containers/registries.d; a registry none names: the local lookaside /var/lib/containers/sigstore, as containers/image)');
}

function pullOptions(o: UpdateCliOptions): RegistrySourceOptions {
  return {
    ...(o.authfile !== undefined ? { authfile: o.authfile } : {}),
    ...(o.certsDir !== undefined ? { certsDir: o.certsDir } : {}),
    ...(o.blobDir !== undefined ? { blobDir: o.blobDir } : {}),
    ...(o.platform !== undefined ? { platform: parsePlatform(o.platform) } : {}),
    ...(o.registriesConf !== undefined ? { registriesConf: o.registriesConf } : {}),
    ...(o.policy !== undefined ? { policy: o.policy } : {}),
    ...(o.registriesD !== undefined ? { registriesD: o.registriesD } : {}),
  };
}

function printCheck(env: CliEnv, o: UpdateCliOptions, c: UpdateCheck): void {
  if (o.json) printJson(env.io, { ok: true, ...c });
  else env.io.out(formatCheck(c, c.upToDate, `deployment ${c.against}`));
}

async function run(env: CliEnv, o: UpdateCliOptions, check: (s: Sysroot, p: RegistrySourceOptions) => Promise<UpdateCheck>, update: (s: Sysroot, p: RegistrySourceOptions, stage: Parameters<Sysroot['upgrade']>[0]) => Promise<UpdateResult>): Promise<void> {
  if (o.check) {
    printCheck(env, o, await check(await openSysroot(env, o), pullOptions(o)));
    return;
  }
  const s = await openSysroot(env, o);
  const bar = progressBar(env.io);
  const pull = pullProgress(env.io, Boolean(o.json));
  try {
    const r = await update(s, { ...pullOptions(o), ...pull.options }, { label: o.label, lock: o.lock, onProgress: bar.update });
    bar.done();
    pull.done();
    if (o.json) printJson(env.io, { ok: true, ...r });
    else if (r.alreadyStaged) env.io.out(`deployment ${r.id} (${r.label}) is staged with the image ${r.pullspec} has now: nothing to do\n`);
    else if (r.alreadyRunning) env.io.out(`the booted deployment ${r.id} (${r.label}) already runs the image ${r.pullspec} has now: nothing staged\n`);
    else {
      env.io.out(`staged deployment ${r.id} (${r.label}) from ${r.pullspec}: ${r.delta.length} path${r.delta.length === 1 ? '' : 's'} changed; it becomes current at the next reboot\n`);
      if (r.activation !== undefined) env.io.out(formatActivation(r.activation));
      for (const w of r.warnings) env.io.err(`stagedroot: warning: ${w.code} at ${w.path}: ${w.message}\n`);
    }
  } finally {
    bar.done();
    pull.done();
  }
}

/** `upgrade` (the tracked image again) and `switch REF` (a new one to track): images in a registry. */
export function upgradeCommands(program: Command, env: CliEnv): void {
  updateOptions(program.command('upgrade'))
    .description('pull the image the booted deployment tracks (the staged one\'s after a switch) and stage it when its digest changed; nothing to do when it did not')
    .action(action(env, (o: UpdateCliOptions) => run(env, o, (s, p) => s.checkUpgrade(p), (s, p, st) => s.upgrade({ ...st, pull: p }))));
  updateOptions(program.command('switch'))
    .description('pull the image REF names and stage it; later upgrades follow REF')
    .argument('<ref>', 'the image: docker://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST), or the same without docker:// (a pullspec)')
    .action(action(env, (ref: string, o: UpdateCliOptions) => run(env, o, (s, p) => s.checkSwitch(ref, p), (s, p, st) => s.switch(ref, { ...st, pull: p }))));
}
