// apply-live on this host, builds interleaved run by run so that they share the load (issue 31,
// BENCHMARKS.md "Live apply against the reboot it replaces"): node scripts/bench/apply-live-host.mjs
// BUILD... (each a checkout with its dist/ built). Per run: a temp sysroot (an etc/ of ETC files, a
// usr/ of USR), one live-decided stage, then `node dist/cli/main.cjs apply-live --systemctl "sh
// test/helpers/fake-systemctl.sh LOG"` under /usr/bin/time (wall; user+sys CPU, threads included).
// Median of N (default 5) for each build.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import * as fs from 'node:fs';
const repos = process.argv.slice(2).map((r) => path.resolve(r));
const N = Number(process.env.N ?? 5), ETC = Number(process.env.ETC ?? 200), USR = Number(process.env.USR ?? 2000);
const libs = await Promise.all(repos.map((r) => import(path.join(r, 'dist/testing/index.js'))));
const tree = { 'etc/containers/policy.json': '{}\n', 'etc/hosts': '127.0.0.1 localhost\n', 'usr/lib/os-release': 'ID=test\n' };
for (let i = 0; i < ETC; i++) tree[`etc/d${i % 20}/f${i}`] = `etc ${i}\n`;
for (let i = 0; i < USR; i++) tree[`usr/share/d${i % 50}/f${i}`] = `usr ${i}\n`;
const res = repos.map(() => ({ wall: [], cpu: [] }));
for (let r = 0; r < N; r++) {
  for (const [k, repo] of repos.entries()) {
    const t = await libs[k].tempSysroot({ tree });
    await t.sysroot.boot({ runDir: '/nonexistent' });
    await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: `{"default":[{"type":"reject"}],"r":${r}}\n` }] });
    const log = path.join(t.scratch, 'systemctl.log');
    const p = spawnSync('/usr/bin/time', ['-f', 'T %e %U %S', process.execPath, path.join(repo, 'dist/cli/main.cjs'), 'apply-live', '--sysroot', t.dir, '--systemctl', `sh ${path.join(repo, 'test/helpers/fake-systemctl.sh')} ${log}`], { encoding: 'utf8' });
    if (p.status !== 0) throw new Error(p.stderr);
    const [, e, u, s] = p.stderr.trim().split('\n').at(-1).split(' ');
    res[k].wall.push(Number(e) * 1000); res[k].cpu.push((Number(u) + Number(s)) * 1000);
    if (fs.readFileSync(log, 'utf8').trim() !== 'reload crio.service') throw new Error('no reload');
    t.cleanup();
  }
}
const med = (a) => Math.round([...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]);
for (const [k, repo] of repos.entries()) console.log(JSON.stringify({ build: repo, etc: ETC, usr: USR, wallMs: res[k].wall.map(Math.round), cpuMs: res[k].cpu.map(Math.round), medianWallMs: med(res[k].wall), medianCpuMs: med(res[k].cpu) }));
