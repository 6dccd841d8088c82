import { describe, expect, it } from 'vitest';
import {
  compileGlob,
  globError,
  MAX_GLOB_CHARS,
  MAX_GLOB_WILDCARDS,
  tryCompileGlob,
} from '../../router/glob.js';
import { goMatch } from './gomatch.js';

/** A small seeded PRNG, so a failure names a reproducible case. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const PATTERN_ALPHABET = [
  'a',
  'b',
  '-',
  '/',
  '.',
  '*',
  '?',
  '[',
  ']',
  '!',
  '^',
  '\\',
  'z',
  '{',
  ',',
  '😀',
  '😎',
];
const NAME_ALPHABET = ['a', 'b', '-', '/', '.', 'z', '!', '[', ']', '^', '{', ',', '😀', '😃', '😎'];

describe('glob matcher agrees with Go path.Match', () => {
  it('on 20,000 random (pattern, name) pairs, emoji included', () => {
    const r = rng(20261122);
    const pick = (xs: string[]) => xs[Math.floor(r() * xs.length)]!;
    let checked = 0;
    let disagreements = 0;
    for (let n = 0; n < 20_000; n++) {
      const pattern = Array.from({ length: 1 + Math.floor(r() * 6) }, () => pick(PATTERN_ALPHABET)).join('');
      const name = Array.from({ length: Math.floor(r() * 5) }, () => pick(NAME_ALPHABET)).join('');
      const want = goMatch(pattern, name);
      const bad = globError(pattern) !== null;
      expect(bad, `well-formedness of ${JSON.stringify(pattern)}`).toBe(want === 'bad');
      if (!bad) {
        const got = compileGlob(pattern)(name);
        if (got !== want) disagreements++;
        expect(got, `${JSON.stringify(pattern)} vs ${JSON.stringify(name)}`).toBe(want);
        checked++;
      }
    }
    expect(disagreements).toBe(0);
    // Most random patterns are malformed; make sure enough well-formed ones were compared.
    expect(checked).toBeGreaterThan(3000);
  });
});

describe('glob validation compiles what matching runs', () => {
  it('accepts a range of emoji and matches by code point (a RegExp without /u threw here)', () => {
    expect(globError('[😀-😎]')).toBeNull();
    const test = compileGlob('[😀-😎]');
    expect(test('😃')).toBe(true);
    expect(test('😏')).toBe(false);
    expect(compileGlob('?')('😃')).toBe(true);
  });

  it('refuses globs over the wildcard and length bounds, with the reason', () => {
    const stars = 'x*'.repeat(MAX_GLOB_WILDCARDS);
    expect(globError(stars)).toBeNull();
    expect(globError(stars + '?')).toMatch(/more than 16 wildcards/);
    expect(globError('a'.repeat(MAX_GLOB_CHARS))).toBeNull();
    expect(globError('a'.repeat(MAX_GLOB_CHARS + 1))).toMatch(/longer than 256/);
    // The reproduction: 10,000 stars used to be accepted and overflow the stack at the first match.
    const huge = 'x*'.repeat(10_000);
    expect(globError(huge)).not.toBeNull();
    expect(() => compileGlob(huge)).toThrow(/GlobError|malformed glob/);
    expect(tryCompileGlob(huge)).toHaveProperty('error');
  });

  it('never backtracks: the worst accepted pattern against 256 characters answers at once', () => {
    const worst = '*a'.repeat(MAX_GLOB_WILDCARDS - 1) + '*b';
    expect(globError(worst)).toBeNull();
    const test = compileGlob(worst);
    // A backtracking RegExp takes far longer than the whole test timeout on this value (bench/glob.ts).
    expect(test('a'.repeat(256))).toBe(false);
    expect(test('a'.repeat(255) + 'b')).toBe(true);
  });
});
