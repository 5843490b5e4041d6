import { parse as parseYaml } from 'yaml';
import { issuesError } from '../../errors.js';
import { parseJsonDocument } from '../document.js';

/**
 * A MachineConfig document's text, JSON or YAML, as plain data. YAML is read the way
 * `kubectl` reads a manifest (sigs.k8s.io/yaml, YAML 1.1): `mode: 0644` is octal (420),
 * duplicate keys are refused, aliases are bounded (no "billion laughs"); only the first
 * document of a stream is a MachineConfig, so a stream of several is refused.
 */
export function parseMachineConfigText(text: string, what: string): unknown {
  if (text.trimStart().startsWith('{')) return parseJsonDocument(text, what);
  let doc: unknown;
  try {
    doc = parseYaml(text, { version: '1.1', uniqueKeys: true, maxAliasCount: 100, prettyErrors: false });
  } catch (err) {
    const message = `not valid YAML: ${(err as Error).message.split('\n')[0]}`;
    throw issuesError([{ code: 'SPEC_INVALID', path: '', message, severity: 'error' }], what);
  }
  // Timestamps (YAML 1.1) become their JSON text, as kubectl sends them.
  return JSON.parse(JSON.stringify(doc ?? null)) as unknown;
}

/** Whether a document (already parsed) says it is a MachineConfig. */
export function isMachineConfig(doc: unknown): boolean {
  return typeof doc === 'object' && doc !== null && (doc as { kind?: unknown }).kind === 'MachineConfig';
}
