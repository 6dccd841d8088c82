import { createRequire } from 'node:module';
import { compileGlob, globError, MAX_GLOB_CHARS, MAX_GLOB_WILDCARDS } from '../router/index.js';

/** One measured pattern. */
export interface GlobFigure {
  matcher: 'linear' | 'regexp';
  pattern: string;
  valueChars: number;
  ms: number;
}

/** Patterns that cost the linear matcher most: as many wildcards and class ranges as the bounds allow. */
function worstAccepted(): Array<{ pattern: string; value: string }> {
  const stars = '*a'.repeat(MAX_GLOB_WILDCARDS - 1) + '*b';
  const mixed = '*?'.repeat(MAX_GLOB_WILDCARDS / 2) + 'b';
  // Classes with as many ranges as fit in 256 characters, none of which matches until the last one.
  const ranges = Math.floor((MAX_GLOB_CHARS - 2 * MAX_GLOB_WILDCARDS - 1) / (3 * MAX_GLOB_WILDCARDS));
  const cls = `[${'b-c'.repeat(ranges)}a]`;
  const classes = `*${cls}`.repeat(MAX_GLOB_WILDCARDS / 2) + 'b';
  return [stars, mixed, classes].map((pattern) => {
    const bad = globError(pattern);
    if (bad) throw new Error(`bench pattern not accepted: ${bad}`);
    return { pattern, value: 'a'.repeat(256) };
  });
}

/** Mean milliseconds of `fn` over enough repetitions to measure. */
function timeMs(fn: () => void): number {
  let reps = 1;
  for (;;) {
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) fn();
    const ms = performance.now() - t0;
    if (ms > 200 || reps >= 1 << 16) return ms / reps;
    reps *= 4;
  }
}

/**
 * The RegExp picomatch/micromatch compile a glob to (options: no braces, extglobs, globstar or negation).
 * Loaded when picomatch is installed (it comes with the test tools); otherwise the same source it emits
 * for `*` is built here: `[^/]*?` per star.
 */
function regexpOf(glob: string): RegExp {
  try {
    const pm = createRequire(import.meta.url)('picomatch') as {
      makeRe(p: string, o: Record<string, boolean>): RegExp;
    };
    return pm.makeRe(glob, { nobrace: true, noextglob: true, noglobstar: true, nonegate: true, dot: true });
  } catch {
    return new RegExp(`^(?:${glob.replace(/\*/g, '[^/]*?')})$`);
  }
}

/**
 * The worst case of both matchers. Linear: every worst accepted pattern against a 256-character value.
 * RegExp: `*a…*b` with k stars against k…40 `a`s, stopping once one test exceeds `budgetMs` (it grows about
 * ×4 per star: 16 stars on 256 characters would not finish).
 */
export function benchGlob(budgetMs = 2000): GlobFigure[] {
  const out: GlobFigure[] = [];
  for (const { pattern, value } of worstAccepted()) {
    const test = compileGlob(pattern);
    out.push({ matcher: 'linear', pattern, valueChars: value.length, ms: timeMs(() => test(value)) });
  }
  outer: for (let k = 4; k <= MAX_GLOB_WILDCARDS; k += 2) {
    const pattern = '*a'.repeat(k - 1) + '*b';
    const re = regexpOf(pattern);
    for (const n of [24, 32, 40]) {
      const value = 'a'.repeat(n);
      const t0 = performance.now();
      re.test(value);
      const ms = performance.now() - t0;
      out.push({ matcher: 'regexp', pattern, valueChars: n, ms });
      if (ms > budgetMs) break outer;
    }
  }
  return out;
}
