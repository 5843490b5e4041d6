import type { Command } from 'commander';
import { StagedrootError } from '../../errors.js';
import { action, common, openSysroot, type CliEnv, type CommonOptions } from '../common.js';
import { printJson } from '../io.js';

/** `trust add FILE`, `trust remove KEYID`, `trust list`: the sysroot's trusted signing keys. */
export function trustCommands(program: Command, env: CliEnv): void {
  common(program.command('trust'))
    .description('the minisign/signify public keys a source must be signed with: `trust add FILE`, `trust remove KEYID`, `trust list` (no key: signatures are not required)')
    .argument('<action>', 'add, remove or list')
    .argument('[key]', 'add: a public key file; remove: a key id as minisign prints it')
    .action(
      action(env, async (verb: string, key: string | undefined, o: CommonOptions) => {
        const need = (what: string): string => {
          if (key === undefined) throw new StagedrootError('USAGE', `\`trust ${verb}\` needs ${what}`, { option: 'key' });
          return key;
        };
        if (verb === 'add') {
          const r = await (await openSysroot(env, o)).addTrustedKey(need('a public key file'));
          if (o.json) printJson(env.io, r);
          else env.io.out(r.added ? `trusted key ${r.keyId} added\n` : `key ${r.keyId} is already trusted\n`);
        } else if (verb === 'remove') {
          const r = await (await openSysroot(env, o)).removeTrustedKey(need('a key id'));
          if (o.json) printJson(env.io, r);
          else env.io.out(`trusted key ${r.keyId} removed\n`);
        } else if (verb === 'list') {
          const keys = (await openSysroot(env, o)).trustedKeys();
          if (o.json) printJson(env.io, { keys });
          else env.io.out(keys.length ? keys.map((k) => `${k}\n`).join('') : 'no trusted keys: sources need no signature\n');
        } else {
          throw new StagedrootError('USAGE', `Expected \`trust add FILE\`, \`trust remove KEYID\` or \`trust list\`, got \`trust ${verb}\``, { option: 'action', value: verb });
        }
      }),
    );
}
