/**
 * An ostree sysroot set up the way ostree's own tests do it (tests/libtest.sh,
 * setup_os_repository + setup_os_boot_syslinux): `ostree admin init-fs`, `ostree admin
 * os-init`, the repo in ostree/repo, a stub syslinux loader so no real bootloader is
 * touched, and `--sysroot` on every admin command. The base tree is committed and
 * deployed once (not measured); each repetition then commits the new tree, deploys it,
 * and undeploys it again (which also prunes its objects) so every repetition starts
 * from the same state.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run, settle, timeCmd } from './tools.mjs';

const OS = 'bench';

export function setupOstree(dir, baseTree) {
  const sysroot = path.join(dir, 'sysroot');
  fs.mkdirSync(sysroot, { recursive: true });
  run('ostree', ['admin', 'init-fs', sysroot]);
  run('ostree', ['admin', 'os-init', `--sysroot=${sysroot}`, OS]);
  fs.mkdirSync(path.join(sysroot, 'boot/loader.0'), { recursive: true });
  fs.symlinkSync('loader.0', path.join(sysroot, 'boot/loader'));
  fs.writeFileSync(path.join(sysroot, 'boot/loader/syslinux.cfg'), '');
  const repo = path.join(sysroot, 'ostree/repo');
  const base = commit(repo, baseTree, 'base').out.trim();
  run('ostree', ['admin', 'deploy', `--sysroot=${sysroot}`, `--os=${OS}`, '--karg=root=LABEL=bench', base]);
  return { sysroot, repo, base };
}

function commit(repo, tree, subject) {
  return timeCmd('ostree', ['commit', `--repo=${repo}`, '--orphan', `--subject=${subject}`, `--tree=dir=${tree}`]);
}

/** One repetition: commit the new tree (timed), deploy it (timed), undeploy it (not timed). */
export function ostreeRound(o, newTree) {
  settle();
  const c = commit(o.repo, newTree, 'update');
  const csum = c.out.trim();
  settle();
  // --no-prune: the repo prune a plain deploy does at the end is left out of the
  // measured time (that makes ostree faster, the comparison stricter for stagedroot).
  const d = timeCmd('ostree', ['admin', 'deploy', `--sysroot=${o.sysroot}`, `--os=${OS}`, '--no-prune', '--karg=root=LABEL=bench', csum]);
  run('ostree', ['admin', 'undeploy', `--sysroot=${o.sysroot}`, '0']);
  return { commit: c.ms, deploy: d.ms };
}

/** ostree marks deployment roots immutable (chattr +i); clear that so the bench can remove its sysroot. */
export function unlockDeployments(o) {
  const dir = path.join(o.sysroot, 'ostree/deploy', OS, 'deploy');
  for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    const p = path.join(dir, name);
    if (fs.lstatSync(p).isDirectory()) run('chattr', ['-i', p]);
  }
}
