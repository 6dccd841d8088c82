import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STEPS } from '../../gateway/steps.js';

const ARCHITECTURE = join(import.meta.dirname, '../../docs/ARCHITECTURE.md');

/** The steps as docs/ARCHITECTURE.md prints them: one numbered line each, indented under its walk. */
function printed(): string {
  return STEPS.map((s, i) => `   ${i + 1}. **${s.name}**: ${s.does}.`).join('\n');
}

describe('the pipeline steps', () => {
  it('are the seven stages in order, each named once', () => {
    expect(STEPS.map((s) => s.name)).toEqual([
      'transcribe',
      'sticky',
      'command',
      'prefix',
      'route',
      'access',
      'gate',
    ]);
  });

  it('are printed in docs/ARCHITECTURE.md exactly as the code lists them', () => {
    const doc = readFileSync(ARCHITECTURE, 'utf8');
    const block = /<!-- steps:[^\n]*-->\n([\s\S]*?)\n<!-- \/steps -->/.exec(doc);
    expect(block, 'the steps block of docs/ARCHITECTURE.md').not.toBeNull();
    expect(block![1]).toBe(printed());
  });
});
