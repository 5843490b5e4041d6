import * as fs from 'node:fs';
import type { FaultHook } from '../core/faults.js';
import { writeNewFile } from '../core/new-entry.js';
import { isRecord } from '../../util/is-record.js';

/** A manifest file's lines (not its overlay's: the file alone) and the sum of the file sizes they record. */
export interface ManifestTotals {
  lines: number;
  bytes: number;
}

/**
 * MANIFEST.summary: the totals of a manifest FILE, so that a stage's manifest pass passes
 * over the base file's unchanged runs (most of the file, shared by link from deployment
 * to deployment, see linked-manifest.ts) without counting their lines and summing their
 * sizes: the new manifest's entries and bytes are the file's totals less what the pass
 * read line by line (ManifestCursor.skipRun). One line,
 * `{"summary":1,"sha256":…,"size":…,"lines":…,"bytes":…}`, keyed by the file's sha256 (the
 * digest its overlay's header, or the state when it has none, records for it) and its
 * size: a summary whose key is not the file's (the manifest rewritten since, a torn or
 * foreign file) is not used, and the pass counts the runs as without one. Written by the
 * pass that links the file (from the summary it trusted, or from what it counted), beside
 * the new deployment's manifest, and made durable with it by the stage's sync step.
 */
export function summaryFile(manifest: string): string {
  return `${manifest}.summary`;
}

const isNat = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;

/** The totals `manifest`'s summary records when its key is (sha256, size); null when absent, unreadable or another file's. */
export function readSummary(manifest: string, sha256: string, size: number): ManifestTotals | null {
  let text: string;
  try {
    text = fs.readFileSync(summaryFile(manifest), 'utf8');
  } catch {
    return null; // none (a deployment staged before summaries), or unreadable: counted instead
  }
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(o) || Object.keys(o).length !== 5) return null;
  if (o.summary !== 1 || o.sha256 !== sha256 || o.size !== size || !isNat(o.lines) || !isNat(o.bytes)) return null;
  return { lines: o.lines, bytes: o.bytes };
}

/** Writes `manifest`'s summary (a new file, not yet fsynced: the caller's sync step makes it durable). */
export function writeSummary(manifest: string, key: { sha256: string; size: number }, t: ManifestTotals, faults: FaultHook): void {
  const file = summaryFile(manifest);
  const data = Buffer.from(`${JSON.stringify({ summary: 1, sha256: key.sha256, size: key.size, lines: t.lines, bytes: t.bytes })}\n`, 'utf8');
  writeNewFile(file, data, faults);
}
