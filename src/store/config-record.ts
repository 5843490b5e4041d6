import * as path from 'node:path';
import { StagedrootError, fieldPath } from '../errors.js';
import { readText, writeJson, type DurableFs } from '../fs/trees/durable.js';
import { configRecordSchema, type ConfigRecord } from '../state/config-record.js';

/** The file beside a deployment's tree (deploy/ID/config.json, work/ID/config.json while staging). */
export const CONFIG_RECORD = 'config.json';

/**
 * The config record of a deployment directory, or null when it was not staged from a
 * config (nor from anything built on one). A record that cannot be read is an error
 * naming the file: guessing "no config" would leave the previous config's paths behind.
 */
export function readConfigRecord(deploymentDir: string): ConfigRecord | null {
  const file = path.join(deploymentDir, CONFIG_RECORD);
  const text = readText(file);
  if (text === null) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new StagedrootError('STATE_CORRUPT', `${file} is not valid JSON (${(err as Error).message})`, { path: file, cause: err });
  }
  const r = configRecordSchema.safeParse(raw);
  if (!r.success) {
    throw new StagedrootError('STATE_CORRUPT', `${file} is not a config record: ${r.error.issues.slice(0, 3).map((i) => `${fieldPath(i.path) || '(root)'}: ${i.message}`).join('; ')}`, { path: file });
  }
  return r.data;
}

/** Writes a deployment directory's config record durably (temp + fsync + rename + fsync dir). */
export function writeConfigRecord(dfs: DurableFs, deploymentDir: string, record: ConfigRecord): void {
  writeJson(dfs, path.join(deploymentDir, CONFIG_RECORD), record);
}
