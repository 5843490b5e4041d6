// `node --import ./record-loads.mjs ...`: every module the ES loader loads (file: URLs) is
// written to the file $RECORD_LOADS names, one URL a line (test/cli/lazy-load.test.ts).
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

const out = process.env.RECORD_LOADS;
if (out) {
  const { port1, port2 } = new MessageChannel();
  port1.on('message', (url) => appendFileSync(out, `${url}\n`));
  port1.unref();
  register(`data:text/javascript,${encodeURIComponent(`let port; export function initialize(d) { port = d.port; } export async function load(url, c, next) { if (url.startsWith('file:')) port.postMessage(url); return next(url, c); }`)}`, { data: { port: port2 }, transferList: [port2] });
}
