import { describe, expect, it } from 'vitest';
import { compileGlob, globError } from '../../router/glob.js';
import { goMatch } from './gomatch.js';

/** A small seeded PRNG, so a failure names a reproducible case. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const PATTERN_ALPHABET = ['a', 'b', '-', '/', '.', '*', '?', '[', ']', '!', '^', '\\', 'z', '{', ','];
const NAME_ALPHABET = ['a', 'b', '-', '/', '.', 'z', '!', '[', ']', '^', '{', ','];

describe('glob translation agrees with Go path.Match', () => {
  it('on 20,000 random (pattern, name) pairs', () => {
    const r = rng(20261122);
    const pick = (xs: string[]) => xs[Math.floor(r() * xs.length)]!;
    let checked = 0;
    for (let n = 0; n < 20_000; n++) {
      const pattern = Array.from({ length: 1 + Math.floor(r() * 6) }, () => pick(PATTERN_ALPHABET)).join('');
      const name = Array.from({ length: Math.floor(r() * 5) }, () => pick(NAME_ALPHABET)).join('');
      const want = goMatch(pattern, name);
      const bad = globError(pattern) !== null;
      expect(bad, `well-formedness of ${JSON.stringify(pattern)}`).toBe(want === 'bad');
      if (!bad) {
        expect(compileGlob(pattern)(name), `${JSON.stringify(pattern)} vs ${JSON.stringify(name)}`).toBe(
          want,
        );
        checked++;
      }
    }
    // Most random patterns are malformed; make sure enough well-formed ones were compared.
    expect(checked).toBeGreaterThan(3000);
  });
});
