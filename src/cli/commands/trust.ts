import type { Command } from 'commander';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

/** `trust add FILE`, `trust remove KEYID`, `trust list`: the sysroot's trusted signing keys. */
export function trustCommands(program: Command, env: CliEnv): void {
  const trust = program.command('trust').description('the minisign/signify public keys a source must be signed with (none: signatures are not required)');
  common(trust.command('add'))
    .description('trust a public key (a minisign/signify .pub file); from then on every stage needs a valid signature')
    .argument('<file>', 'public key file')
    .action(
      action(env, async (file: string, o: CommonOptions) => {
        const r = await (await openSysroot(env, o)).addTrustedKey(file);
        if (o.json) printJson(env.io, r);
        else env.io.out(r.added ? `trusted key ${r.keyId} added\n` : `key ${r.keyId} is already trusted\n`);
      }),
    );
  common(trust.command('remove'))
    .description('stop trusting a key (by the id minisign prints); with no key left, signatures are no longer required')
    .argument('<key-id>', 'key id, 16 hex digits')
    .action(
      action(env, async (keyId: string, o: CommonOptions) => {
        const r = await (await openSysroot(env, o)).removeTrustedKey(keyId);
        if (o.json) printJson(env.io, r);
        else env.io.out(`trusted key ${r.keyId} removed\n`);
      }),
    );
  common(trust.command('list'))
    .description('list the trusted key ids')
    .action(
      action(env, async (o: CommonOptions) => {
        const keys = (await openSysroot(env, o, { readOnly: true })).trustedKeys();
        if (o.json) printJson(env.io, { keys });
        else env.io.out(keys.length ? keys.map((k) => `${k}\n`).join('') : 'no trusted keys: sources need no signature\n');
      }),
    );
  for (const c of trust.commands) c.exitOverride().configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) });
}
