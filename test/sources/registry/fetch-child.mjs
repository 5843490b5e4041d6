// A pull killed at a random point (test/sources/registry/kill.test.ts): fetches one blob
// from a plain-http registry with the built library, until it is killed.
import { RegistryClient } from '../../../dist/sources/registry/client.js';
import { parseDockerReference } from '../../../dist/sources/registry/reference.js';

const [host, digest, size, dest] = process.argv.slice(2);
const client = new RegistryClient(parseDockerReference(`docker://${host}/os:1`), { plainHttp: true, auth: null, backoffMs: 5 });
await client.fetchBlob({ digest, size: Number(size) }, dest, 'layer 1 of 1');
process.stdout.write('done\n');
