import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The bench's sections of BENCHMARKS.md are named by what they measure, and a
 * `npm run bench -- --cli` run finds its own by its heading (spliceCliSection): the
 * headings the scripts write must be the document's.
 */
// @ts-expect-error: a plain .mjs script without types
const { CLI_HEADING, spliceCliSection } = (await import('../../scripts/bench/cli.mjs')) as { CLI_HEADING: string; spliceCliSection: (doc: string, section: string) => string };
// @ts-expect-error: a plain .mjs script without types
const { FILESYSTEM_HEADING, REFERENCE_HEADING } = (await import('../../scripts/bench/report.mjs')) as { FILESYSTEM_HEADING: string; REFERENCE_HEADING: string };
const doc = fs.readFileSync(fileURLToPath(new URL('../../BENCHMARKS.md', import.meta.url)), 'utf8');
const headings = doc.split('\n').filter((l) => l.startsWith('## '));

describe('BENCHMARKS.md and scripts/bench', () => {
  it('has each targets section the bench writes, once, in the order it writes them', () => {
    const targets = headings.filter((h) => h.startsWith('## Targets'));
    expect(targets).toEqual([CLI_HEADING, FILESYSTEM_HEADING, REFERENCE_HEADING]);
    for (const h of headings) expect(h, 'a heading says what its rows measure, not which issue asked for them').not.toMatch(/issue \d+/i);
  });

  it('a --cli run replaces the CLI section in place and leaves the others as they are', () => {
    const section = `${CLI_HEADING}\n\nnew figures\n`;
    const out = spliceCliSection(doc, section);
    // The section after the CLI's (the registry pulls', as the whole bench writes them) is left where it was.
    const after = headings[headings.indexOf(CLI_HEADING) + 1]!;
    expect(after).toBeDefined();
    expect(out.split(CLI_HEADING)).toHaveLength(2);
    expect(out).toContain(`${section}\n${after}`);
    expect(out.slice(out.indexOf(after))).toBe(doc.slice(doc.indexOf(after)));
    expect(out.slice(0, out.indexOf(CLI_HEADING))).toBe(doc.slice(0, doc.indexOf(CLI_HEADING)));
    // Twice is the same as once.
    expect(spliceCliSection(out, section)).toBe(out);
  });
});
