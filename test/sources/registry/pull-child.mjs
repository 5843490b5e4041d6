// One pull into a shared blob directory (test/sources/registry/shared-blob-dir.test.ts),
// with the built library: two of these run at once into one directory.
import { pullImage } from '../../../dist/sources/registry/pull.js';
import { parseDockerReference } from '../../../dist/sources/registry/reference.js';

const [image, dir] = process.argv.slice(2);
const pulled = await pullImage(parseDockerReference(`docker://${image}`), dir, { plainHttp: true, auth: null, backoffMs: 5, registriesConf: null, policy: null });
process.stdout.write(JSON.stringify({ digest: pulled.digest, fetched: pulled.fetched, cached: pulled.cached }) + '\n');
