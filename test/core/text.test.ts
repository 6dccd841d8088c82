import { describe, expect, it } from 'vitest';
import { clipBytes, graphemeLength, measure, splitText, type LimitUnit } from '../../core/text.js';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A text without whitespace and fence lines (which splitting may add), so content can be compared. */
function content(s: string): string {
  return s.replace(/\s+/g, '').replace(/```(js|python)?/g, '');
}

function checkParts(text: string, limit: number, unit: LimitUnit): string[] {
  const parts = splitText(text, limit, unit);
  for (const p of parts) {
    expect(measure(p, unit), `part over the limit: ${JSON.stringify(p)}`).toBeLessThanOrEqual(limit);
    expect(p.trim()).not.toBe('');
  }
  expect(content(parts.join(''))).toBe(content(text));
  return parts;
}

describe('splitText', () => {
  it('keeps a short reply whole', () => {
    expect(splitText('hello world', 4096)).toEqual(['hello world']);
    expect(splitText('  \n\nhello\n\n  ', 10)).toEqual(['hello']);
  });

  it('cuts at a paragraph break before a line break or a space', () => {
    const a = 'first paragraph line one\nline two';
    const b = 'second paragraph';
    expect(splitText(`${a}\n\n${b}`, a.length + 5)).toEqual([a, b]);
  });

  it('falls back to a line break, then to a space', () => {
    expect(splitText('aaaa bbbb\ncccc dddd', 12)).toEqual(['aaaa bbbb', 'cccc dddd']);
    expect(splitText('aaaa bbbb cccc dddd', 12)).toEqual(['aaaa bbbb', 'cccc dddd']);
  });

  it('prefers a late line break over an early paragraph break', () => {
    const text = `ab\n\n${'x'.repeat(20)}\n${'y'.repeat(20)}`;
    expect(splitText(text, 30)).toEqual([`ab\n\n${'x'.repeat(20)}`, 'y'.repeat(20)]);
  });

  it('hard-cuts a word longer than the limit without tearing a surrogate pair or an emoji sequence', () => {
    const family = '👨‍👩‍👧';
    const text = `${'a'.repeat(9)}${family}${'b'.repeat(20)}`;
    const parts = checkPartsRaw(text, 10, 'chars');
    expect(parts[0]).toBe('a'.repeat(9));
    expect(parts.join('')).toBe(text);
    for (const p of parts) expect(p).not.toMatch(LONE_SURROGATE);
  });

  it('counts graphemes for a grapheme limit', () => {
    const text = '👍🏽'.repeat(400);
    const parts = splitText(text, 300, 'graphemes');
    expect(parts.map((p) => graphemeLength(p))).toEqual([300, 100]);
    expect(parts.join('')).toBe(text);
  });

  it('cuts before a code block rather than inside it', () => {
    const intro = 'Here is the code:';
    const code = '```ts\nconst a = 1;\nconst b = 2;\n```';
    const parts = splitText(`${intro}\n\n${code}\n\nDone.`, code.length + 4);
    expect(parts).toEqual([intro, code, 'Done.']);
  });

  it('closes and reopens a code block that is longer than the limit', () => {
    const lines = Array.from({ length: 40 }, (_, i) => `  line_${i} = ${i}`);
    const text = `Result:\n\`\`\`python\n${lines.join('\n')}\n\`\`\`\nend`;
    const parts = checkParts(text, 120, 'chars');
    expect(parts.length).toBeGreaterThan(3);
    for (const p of parts.slice(1, -1)) {
      expect(p.startsWith('```python\n')).toBe(true);
      expect(p.endsWith('\n```')).toBe(true);
    }
    for (const p of parts) expect((p.match(/^```/gm) ?? []).length % 2).toBe(0);
    // Indentation inside the block survives the cut.
    expect(parts.join('\n')).toContain('\n  line_17 = 17');
  });

  it('always respects the limit and keeps every word, in order (generated texts)', () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const atoms = [
      'word',
      'longerword',
      '\n',
      '\n\n',
      '\n```js\n',
      '\n```\n',
      ' ',
      'é',
      '🎉',
      'x'.repeat(30),
    ];
    for (let round = 0; round < 300; round += 1) {
      const n = 1 + Math.floor(rnd() * 60);
      let text = '';
      for (let i = 0; i < n; i += 1)
        text += atoms[Math.floor(rnd() * atoms.length)] + (rnd() < 0.5 ? ' ' : '');
      const unit: LimitUnit = rnd() < 0.5 ? 'chars' : 'graphemes';
      const limit = 20 + Math.floor(rnd() * 80);
      checkParts(text, limit, unit);
      expect(splitText(text, limit, unit)).toEqual(splitText(text, limit, unit));
    }
  });

  it('splits 10 MiB in linear time', () => {
    // Linear, not quadratic: 16 times the text takes about 16 times as long (13–36 measured at load 20),
    // where a quadratic split takes 256 times. Compared as a ratio of the fastest of three interleaved runs
    // of each size, not against a wall-clock bound, which a loaded machine fails (3,120 ms against 3,000).
    const small = 'lorem ipsum dolor sit amet\n'.repeat(25_000);
    const large = 'lorem ipsum dolor sit amet\n'.repeat(400_000);
    const fastest = { small: Infinity, large: Infinity };
    for (let i = 0; i < 3; i++) {
      for (const size of ['small', 'large'] as const) {
        const t0 = performance.now();
        const parts = splitText(size === 'small' ? small : large, 4096, 'chars');
        fastest[size] = Math.min(fastest[size], performance.now() - t0);
        expect(parts.every((p) => p.length <= 4096)).toBe(true);
      }
    }
    expect(fastest.large / fastest.small).toBeLessThan(100);
  });

  it('rejects a limit below one', () => {
    expect(() => splitText('x', 0)).toThrow(RangeError);
  });
});

/** splitText plus the limit check, for texts whose hard cuts keep no whitespace to compare by. */
function checkPartsRaw(text: string, limit: number, unit: LimitUnit): string[] {
  const parts = splitText(text, limit, unit);
  for (const p of parts) expect(measure(p, unit)).toBeLessThanOrEqual(limit);
  return parts;
}

describe('clipBytes', () => {
  const texts = ['a'.repeat(200), 'é'.repeat(100), '😀'.repeat(60), 'ab😀cé'.repeat(30)];

  it('never returns more bytes than the bound, whatever the bound', () => {
    for (const text of texts) {
      for (let bound = 0; bound <= 120; bound++) {
        const cut = clipBytes(text, bound);
        expect(Buffer.byteLength(cut, 'utf8'), `${bound} bytes of ${text.slice(0, 6)}…`).toBeLessThanOrEqual(
          bound,
        );
        // Whole code points only: nothing decodes to the replacement character.
        expect(cut).not.toContain('\uFFFD');
      }
    }
  });

  it('says how much was left out when the note fits, and returns text within the bound as is', () => {
    const cut = clipBytes('é'.repeat(100), 100);
    expect(cut).toMatch(/\[… 200 bytes in all, cut to 100\]$/);
    expect(cut.startsWith('é'.repeat(10))).toBe(true);
    expect(clipBytes('short', 5)).toBe('short');
    expect(clipBytes('a'.repeat(20), 10)).toBe('a'.repeat(7) + '…');
  });
});
