import * as path from 'node:path';
import { readJsonState, writeJson, type DurableFs } from '../fs/trees/durable.js';
import { configRecordSchema, type ConfigRecord } from '../state/config-record.js';

/** The file beside a deployment's tree (deploy/ID/config.json, work/ID/config.json while staging). */
export const CONFIG_RECORD = 'config.json';

/**
 * The config record of a deployment directory, or null when it was not staged from a
 * config (nor from anything built on one). A record that cannot be read is an error
 * naming the file: guessing "no config" would leave the previous config's paths behind.
 */
export function readConfigRecord(deploymentDir: string): ConfigRecord | null {
  return readJsonState(path.join(deploymentDir, CONFIG_RECORD), configRecordSchema, 'config record');
}

/** Writes a deployment directory's config record durably (temp + fsync + rename + fsync dir). */
export function writeConfigRecord(dfs: DurableFs, deploymentDir: string, record: ConfigRecord): void {
  writeJson(dfs, path.join(deploymentDir, CONFIG_RECORD), record);
}
