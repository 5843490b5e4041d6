// Imports one layer blob into a layer store in its own process, for the crash-point test
// (test/layer-store/crash-import.test.ts). Uses the compiled library (dist/).
//   node crash-import-child.mjs '{"store": DIR, "file": BLOB, "digest": D, "diffId": D, "size": N}'             (counts)
//   node crash-import-child.mjs '{"store": DIR, "file": BLOB, "digest": D, "diffId": D, "size": N, "killAfter": 7}'
//   ... "defer": true: imported with deferCommit, then one syncfs and LayerStore.commitPending
// Counting mode prints {"count": N, "ops": [...]} on stdout; kill mode dies by SIGKILL right
// after the n-th mutating filesystem call, naming it on stderr first.
import { readFileSync, writeSync } from 'node:fs';
import { importLayer } from '../../dist/layer-store/import-layer.js';
import { LayerStore } from '../../dist/layer-store/store.js';
import { countingHook, killAfter } from '../../dist/testing/index.js';
import { syncFilesystemNow } from '../../dist/fs/core/sync-fs.js';

const a = JSON.parse(process.argv[2]);
const hook = a.killAfter === undefined ? countingHook() : killAfter(a.killAfter, (op, p) => writeSync(2, `killed after ${op} ${p}\n`));
const store = new LayerStore(a.store, hook);
const data = readFileSync(a.file);
await importLayer(store, { digest: a.digest, diffId: a.diffId, size: a.size, where: `blob ${a.digest}`, async *open() { yield data; } }, { deferCommit: a.defer === true });
// "defer": as a stage imports (its layers committed after its tree's syncfs).
if (a.defer === true) {
  syncFilesystemNow(a.store, process.env);
  store.commitPending();
}
if (a.killAfter === undefined) process.stdout.write(JSON.stringify({ count: hook.count, ops: hook.ops }));
