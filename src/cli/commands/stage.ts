import { formatActivation } from '../format-activation.js';
import type { Command } from 'commander';
import { StagedrootError, type Issue } from '../../errors.js';
import { pathSource } from '../../sources/detect.js';
import { commandSource } from '../../sources/command.js';
import { parsePlatform } from '../../sources/oci/platform.js';
import { checkRegistryImage } from '../../sources/registry/check.js';
import { formatCheck } from '../format-pull.js';
import { isRegistryReference, parseDockerReference } from '../../sources/registry/reference.js';
import type { BuiltinOptions } from '../../validate/builtins.js';
import { DEFAULT_SETUID_ALLOW_LIST } from '../../validate/unsafe-modes.js';
import { action, collect, common, xattrOption, nonNegativeInt, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';
import { formatDryRun } from '../format.js';
import { EXIT } from '../../exit-codes.js';
import { progressBar } from '../progress.js';
import { pullProgress } from '../pull-progress.js';

interface StageCliOptions extends CommonOptions {
  label?: string;
  lock?: boolean;
  copy?: boolean;
  replace?: boolean;
  verifyUnits: boolean;
  checkLinks: boolean;
  checkModes: boolean;
  checkSpace: boolean;
  checkRequired: boolean;
  require: string[];
  allowSetuid: string[];
  minFree?: string;
  validator: string[];
  validatorTimeout?: string;
  signature?: string;
  disruptionPolicy?: string;
  platform?: string;
  ref?: string;
  imageStore?: string;
  pull?: boolean;
  owner?: string;
  authfile?: string;
  certsDir?: string;
  blobDir?: string;
  registriesConf?: string;
  policy?: string;
  registriesD?: string;
  check?: boolean;
  dryRun?: boolean;
  run?: string;
  bind: string[];
  runTimeout?: string;
}


/** The built-in validator flags as library options. */
function builtinsFrom(o: StageCliOptions): BuiltinOptions {
  const minFree = nonNegativeInt('min-free', o.minFree);
  return {
    systemdVerify: o.verifyUnits,
    wantsLinks: o.checkLinks,
    unsafeModes: o.checkModes && (o.allowSetuid.length ? { setuidAllowList: [...DEFAULT_SETUID_ALLOW_LIST, ...o.allowSetuid] } : true),
    requiredPaths: o.checkRequired && (o.require.length ? o.require : true),
    freeSpace: o.checkSpace && (minFree !== undefined ? { reserveBytes: minFree } : true),
  };
}

/** The warnings of a stage or of its dry run, one line each on stderr. */
function printWarnings(env: CliEnv, warnings: readonly Issue[]): void {
  for (const w of warnings) env.io.err(`stagedroot: warning: ${w.code} at ${w.path}: ${w.message}\n`);
}

export function stageCommand(program: Command, env: CliEnv): void {
  xattrOption(common(program.command('stage')))
    .description('stage an update (a spec, Ignition config, MachineConfig, tar layer, OCI image or directory; kind detected from its content)')
    .argument('[source]', 'file or directory to stage (none with --run)')
    .option('--run <command>', 'instead of a source: run this shell command inside a copy of the booted tree (private mount and PID namespace; /proc, /sys, /dev, the network; nothing of the running system writable), then validate and commit what it changed, e.g. --run "apt-get update && apt-get -y upgrade"')
    .option('--run-timeout <seconds>', 'time limit of the --run command (default 3600)')
    .option('--bind <dir>', 'with --run: a directory of the running system the command sees read-only at the same path (a local package directory, a mounted medium); repeatable', collect, [])
    .option('--label <label>', 'a label for the new deployment')
    .option('--lock', 'finalization lock: stage now, but finalize leaves it in place until `unlock`')
    .option('--copy', 'copy the non-usr/ part of the tree instead of reflinking it')
    .option('--replace', 'a tar or directory source is the whole new tree, not a layer over the booted one')
    .option('--no-verify-units', 'skip `systemd-analyze verify` of the units and drop-ins the update changes')
    .option('--no-check-links', 'skip the check for dangling *.wants/*.requires links')
    .option('--no-check-modes', 'skip the check for world-writable files under etc/ and set-uid files')
    .option('--no-check-space', 'skip the free-space preflight')
    .option('--no-check-required', 'skip the required-paths check')
    .option('--require <path>', 'a path the staged tree must have (repeatable; replaces the default etc/os-release rule)', collect, [])
    .option('--allow-setuid <path>', 'allow set-uid/set-gid files at or below this tree path, besides the defaults (repeatable)', collect, [])
    .option('--min-free <bytes>', 'bytes that must stay free after the stage')
    .option('--validator <command>', 'an executable that judges the staged tree ($STAGEDROOT_TREE); non-zero exit rejects (repeatable)', collect, [])
    .option('--validator-timeout <seconds>', 'time limit of each --validator (default 60)')
    .option('--platform <os/arch>', 'for an image: the manifest for this platform (default: linux and this host\'s architecture)')
    .option('--ref <name>', 'for an image: the manifest its index names so (org.opencontainers.image.ref.name; a docker archive\'s tag)')
    .option('--image-store <path>', 'for a MachineConfig: the OCI layout directory or oci-archive holding the image its spec.osImageURL names (nothing is pulled)')
    .option('--pull', 'for a MachineConfig: pull the image its spec.osImageURL names from its registry (as the MCD does), with --authfile, --certs-dir, --blob-dir; instead of --image-store')
    .option('--authfile <file>', 'for docker://… (and --pull): the registry credentials (docker config.json format; default: the first of /run/stagedroot/auth.json, /etc/stagedroot/auth.json, /run/ostree/auth.json, /etc/ostree/auth.json, /var/lib/kubelet/config.json)')
    .option('--certs-dir <dir>', 'for docker://…: the registries\' TLS files, HOST[:PORT]/*.crt, *.cert, *.key (default /etc/containers/certs.d)')
    .option('--blob-dir <dir>', 'for docker://…: the OCI layout the image is pulled into, its blobs kept for the next pull (default /var/cache/stagedroot/registry)')
    .option('--registries-conf <file>', 'for docker://… (and --pull): the registries configuration, read alone (default /etc/containers/registries.conf and registries.conf.d/*.conf): mirrors, blocked and insecure registries')
    .option('--policy <file>', 'for docker://… (and --pull): the signature policy, containers-policy.json (default /etc/containers/policy.json; none there: every image accepted)')
    .option('--registries-d <dir>', 'for docker://… (and --pull): where each registry\'s signatures are, registries.d YAML files (default /etc/containers/registries.d; a registry none names: the local lookaside /var/lib/containers/sigstore, as containers/image)')
    .option('--check', 'for docker://…: fetch only the manifests and config and print the digest, the version label, and the layers already present and still needed with their bytes; stage nothing')
    .option('--owner <name>', 'for a MachineConfig: configs of one owner replace each other\'s kernel arguments and paths (default: machine-config)')
    .option('--dry-run', 'print what the stage would add, modify and remove (the `diff` format) and its issues; write nothing; exit 3 when it would be rejected')
    .option('--disruption-policy <file>', 'a MachineConfiguration (YAML or JSON) whose node disruption policies are merged over the defaults for the activation decision (default: the booted /etc/stagedroot/disruption-policy.yaml)')
    .option('--signature <file>', 'the detached minisign signature of the source (default: SOURCE.minisig); required when the sysroot trusts a key')
    .action(
      action(env, async (path: string | undefined, o: StageCliOptions) => {
        if ((path === undefined) === (o.run === undefined)) {
          throw new StagedrootError('USAGE', path === undefined ? 'Nothing to stage: give a SOURCE, or --run COMMAND' : 'Give a SOURCE or --run COMMAND, not both', { option: 'run', value: o.run });
        }
        if (o.run === undefined && o.bind.length > 0) throw new StagedrootError('USAGE', '--bind is for --run: it binds a directory into the command\'s namespace', { option: 'bind', value: o.bind[0] });
        if (o.run !== undefined && o.dryRun) throw new StagedrootError('USAGE', '--dry-run cannot tell what a --run command would change without running it', { option: 'dryRun' });
        if (o.check) {
          if (path === undefined || !isRegistryReference(path)) throw new StagedrootError('USAGE', '--check applies to an image in a registry (docker://…)', { option: 'check', value: path ?? o.run });
          const ref = parseDockerReference(path, { what: 'The source' });
          const st = (await openSysroot(env, o)).status();
          const c = await checkRegistryImage(ref, { authfile: o.authfile, certsDir: o.certsDir, blobDir: o.blobDir, ...(o.registriesConf !== undefined ? { registriesConf: o.registriesConf } : {}), ...(o.policy !== undefined ? { policy: o.policy } : {}), ...(o.registriesD !== undefined ? { registriesD: o.registriesD } : {}), ...(o.platform === undefined ? {} : { platform: parsePlatform(o.platform) }) });
          const upToDate = st.deployments.find((d) => d.id === st.booted)?.origin?.digest === c.digest;
          if (o.json) printJson(env.io, { ok: true, ...c, upToDate });
          else env.io.out(formatCheck(c, upToDate));
          return EXIT.OK;
        }
        const runTimeout = nonNegativeInt('run-timeout', o.runTimeout);
        // A pull's progress per layer (a docker://… source): a terminal's line, or --json lines on stderr.
        const pull = pullProgress(env.io, Boolean(o.json) && !o.dryRun);
        const pulled = path !== undefined && (isRegistryReference(path) || o.pull) ? pull.options : {};
        const source = o.run !== undefined ? commandSource(o.run, { binds: o.bind, ...(runTimeout === undefined ? {} : { timeoutMs: runTimeout * 1000 }) }) : pathSource(path!, { replace: o.replace, ref: o.ref, imageStore: o.imageStore, pull: o.pull, owner: o.owner, authfile: o.authfile, certsDir: o.certsDir, blobDir: o.blobDir, registriesConf: o.registriesConf, policy: o.policy, registriesD: o.registriesD, ...(o.platform === undefined ? {} : { platform: parsePlatform(o.platform) }), ...pulled });
        const builtins = builtinsFrom(o);
        const timeout = nonNegativeInt('validator-timeout', o.validatorTimeout);
        const commands = o.validator.map((command) => ({ command, ...(timeout === undefined ? {} : { timeoutMs: timeout * 1000 }) }));
        if (o.dryRun) {
          const r = await (await openSysroot(env, o)).dryRun(source, { label: o.label, builtins, signature: o.signature, disruptionPolicy: o.disruptionPolicy });
          if (o.json) printJson(env.io, r);
          else {
            env.io.out(formatDryRun(r));
            printWarnings(env, r.warnings);
          }
          return r.ok ? EXIT.OK : EXIT.REJECTED;
        }
        const s = await openSysroot(env, o);
        // A command's output streams to stderr as it comes (no bar drawn over it).
        const bar = o.run === undefined ? progressBar(env.io) : { update: () => {}, done: () => {} };
        try {
          const r = await s.stage(source, { label: o.label, lock: o.lock, onProgress: bar.update, copyPolicy: o.copy ? { mode: 'copy' } : undefined, builtins, commands, signature: o.signature, disruptionPolicy: o.disruptionPolicy, onCommandOutput: (t) => env.io.err(t) });
          bar.done();
          if (o.json) printJson(env.io, { ok: true, ...r });
          else if (r.alreadyRunning) env.io.out(`the booted deployment ${r.id} (${r.label}) already runs this image: nothing staged\n`);
          else {
            env.io.out(`staged deployment ${r.id} (${r.label}): ${r.delta.length} path${r.delta.length === 1 ? '' : 's'} changed; it becomes current at the next reboot\n`);
            if (r.activation !== undefined) env.io.out(formatActivation(r.activation));
            printWarnings(env, r.warnings);
          }
        } catch (err) {
          bar.done();
          // A command validator's output is in the failure record; show it with the error.
          const output = err instanceof StagedrootError && err.code === 'VALIDATION_FAILED' ? s.status().lastFailure?.output : undefined;
          if (output && !o.json) env.io.err(output.endsWith('\n') ? output : output + '\n');
          throw err;
        } finally {
          bar.done();
          pull.done();
        }
      }),
    );
}
