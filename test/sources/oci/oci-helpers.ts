import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { execa } from 'execa';

/**
 * Images built with the real tools (Debian's umoci and skopeo), as users build them.
 * umoci 0.4.7 writes its `insert` layers without the end-of-archive blocks (umoci#436)
 * and its index without platforms (the config has os/architecture).
 */
export type Files = Record<string, string>;

export function writeFiles(dir: string, files: Files): string {
  fs.mkdirSync(dir, { recursive: true });
  for (const [rel, c] of Object.entries(files)) {
    if (rel.endsWith('/')) {
      fs.mkdirSync(path.join(dir, rel), { recursive: true });
      continue;
    }
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), c);
  }
  return dir;
}

export type Step = { add: Files; at?: string; opaque?: boolean } | { whiteout: string };

/** `umoci new` + one `umoci insert` per step (each a layer), in a layout at `layout`. */
export async function umociImage(scratch: string, layout: string, tag: string, steps: Step[], o: { arch?: string; labels?: Record<string, string> } = {}): Promise<void> {
  if (!fs.existsSync(path.join(layout, 'oci-layout'))) await execa('umoci', ['init', '--layout', layout]);
  const image = `${layout}:${tag}`;
  await execa('umoci', ['new', '--image', image]);
  const cfg = ['--os', 'linux', '--architecture', o.arch ?? 'amd64', ...Object.entries(o.labels ?? {}).flatMap(([k, v]) => ['--config.label', `${k}=${v}`])];
  await execa('umoci', ['config', '--image', image, ...cfg]);
  let n = 0;
  for (const s of steps) {
    if ('whiteout' in s) await execa('umoci', ['insert', '--image', image, '--whiteout', s.whiteout]);
    else {
      const src = writeFiles(fs.mkdtempSync(path.join(scratch, `layer-${n++}-`)), s.add);
      await execa('umoci', ['insert', '--image', image, ...(s.opaque ? ['--opaque'] : []), src, s.at ?? '/']);
    }
  }
}

export function skopeo(args: string[]) {
  return execa('skopeo', ['--insecure-policy', ...args]);
}

export const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

export function readIndex(layout: string): { manifests: { digest: string; size: number; mediaType: string; platform?: unknown; annotations?: Record<string, string> }[] } {
  return JSON.parse(fs.readFileSync(path.join(layout, 'index.json'), 'utf8'));
}

export const blob = (layout: string, digest: string) => path.join(layout, 'blobs', ...digest.split(':'));

export function manifestOf(layout: string, i = 0): { digest: string; json: { config: { digest: string }; layers: { digest: string; size: number; mediaType: string }[] } } {
  const d = readIndex(layout).manifests[i]!;
  return { digest: d.digest, json: JSON.parse(fs.readFileSync(blob(layout, d.digest), 'utf8')) };
}

/** Rewrites manifest i (a new blob, the index pointing at it), as a tool that edits an image would. */
export function rewriteManifest(layout: string, i: number, edit: (m: Record<string, unknown>) => void): string {
  const index = readIndex(layout);
  const m = JSON.parse(fs.readFileSync(blob(layout, index.manifests[i]!.digest), 'utf8'));
  edit(m);
  const data = Buffer.from(JSON.stringify(m));
  const digest = `sha256:${sha256(data)}`;
  fs.writeFileSync(blob(layout, digest), data);
  index.manifests[i] = { ...index.manifests[i]!, digest, size: data.length };
  fs.writeFileSync(path.join(layout, 'index.json'), JSON.stringify(index));
  return digest;
}

/** Every path below a tree with its kind and, for files, content: what a staged image must equal. */
export function listing(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(path.join(root, r));
      if (st.isDirectory()) {
        out[`${r}/`] = '';
        walk(r);
      } else if (st.isSymbolicLink()) out[r] = `-> ${fs.readlinkSync(path.join(root, r))}`;
      else out[r] = fs.readFileSync(path.join(root, r), 'utf8');
    }
  };
  walk('');
  return out;
}
