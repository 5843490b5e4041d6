/* eslint-disable @typescript-eslint/no-explicit-any -- MachineConfig documents are edited here as plain JSON */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { TreeSpec } from '../../../src/testing/index.js';

export const FIXTURES = fileURLToPath(new URL('../../../fixtures/machine-config/', import.meta.url));

export const fixture = (name: string): string => path.join(FIXTURES, name);

/** A rendered fixture as data (to edit into a variant). */
export function renderedDoc(n: 1 | 2 | 3): Record<string, any> {
  return parse(fs.readFileSync(fixture(`rendered-worker-${n}.yaml`), 'utf8'), { version: '1.1' }) as Record<string, any>;
}

/** The node the rendered configs are staged on: an OS tree with systemd's vendor units, no MCO files. */
export const NODE_TREE: TreeSpec = {
  'etc/os-release': 'ID=rhcos\nVERSION_ID=9.6\n',
  'etc/passwd': 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n',
  'etc/group': 'root:x:0:\ncore:x:1000:\n',
  // The OS image's own chrony.conf: what a config that lets the path go restores.
  'etc/chrony.conf': { content: 'pool 2.rhel.pool.ntp.org iburst\n', mode: 0o644 },
  'etc/containers/policy.json': '{"default":[{"type":"insecureAcceptAnything"}]}\n',
  'usr/lib/systemd/system/chronyd.service': '[Unit]\nDescription=NTP client/server\n[Service]\nExecStart=/usr/sbin/chronyd\n[Install]\nWantedBy=multi-user.target\n',
  'usr/lib/systemd/system/multi-user.target': '[Unit]\nDescription=Multi-User System\n',
};

/** The files every rendered fixture writes (path -> contents), decoded from its data: URLs. */
export function filesOf(doc: Record<string, any>): Map<string, { data: Buffer; mode: number }> {
  const out = new Map<string, { data: Buffer; mode: number }>();
  for (const f of doc.spec.config.storage.files as { path: string; mode: number; contents: { source: string } }[]) {
    const src = f.contents.source;
    const data = src.startsWith('data:,') ? Buffer.from(decodeURIComponent(src.slice(6)), 'utf8') : Buffer.from(src.slice(src.indexOf('base64,') + 7), 'base64');
    out.set(f.path.slice(1), { data, mode: f.mode });
  }
  return out;
}
