/**
 * Globs with Go `path.Match` semantics: `*` (any run of non-`/` characters, including none), `?` (one
 * non-`/` character), `[abc]`, `[a-z]`, `[!abc]` / `[^abc]`, and `\` escaping the next character.
 * Case-sensitive; no braces, extglobs, globstar, POSIX classes or negation. Characters are Unicode code
 * points, as Go's runes are: `?` matches one emoji, and `[😀-😎]` is a range like any other.
 *
 * A glob is parsed once into tokens, and the same tokens are what matching runs: the validator cannot
 * accept a pattern that later fails to compile. Matching simulates the pattern as a set of positions
 * (a Thompson NFA): every character of the value advances all positions at once, so the cost is at most
 * (value length × pattern tokens) steps and never exponential, whatever the pattern. A RegExp translation
 * (which is what picomatch/micromatch produce) backtracks: `*a*a*a*a*a*a*a*a*b` against a long run of `a`
 * takes seconds. `npm run bench -- --only=glob` prints both figures (docs/ROUTING.md).
 *
 * test/router/glob-property.test.ts checks this matcher against a reference implementation of Go's
 * algorithm on random patterns, emoji included.
 */

/** A compiled glob: a predicate over one field value. */
export type GlobTest = (value: string) => boolean;

/** Longest accepted glob, in characters: routing keys are short; a long pattern is a mistake or an attack. */
export const MAX_GLOB_CHARS = 256;
/** Most wildcards (`*`, `?` and classes together) one glob may hold. */
export const MAX_GLOB_WILDCARDS = 16;

const SLASH = 0x2f;

/** One step of a parsed glob. */
type Token =
  | { kind: 'char'; cp: number }
  | { kind: 'any' }
  | { kind: 'star' }
  | { kind: 'class'; negated: boolean; ranges: Array<[number, number]> };

/** Parses a glob into tokens, or returns why it is malformed or too costly. */
function parseGlob(glob: string): Token[] | string {
  const cps = Array.from(glob, (c) => c.codePointAt(0)!);
  if (cps.length > MAX_GLOB_CHARS) return `longer than ${MAX_GLOB_CHARS} characters`;
  const tokens: Token[] = [];
  let wildcards = 0;
  let i = 0;
  while (i < cps.length) {
    const c = cps[i]!;
    if (c === 0x5c /* \ */) {
      if (i + 1 >= cps.length) return 'ends with an escaping \\';
      tokens.push({ kind: 'char', cp: cps[i + 1]! });
      i += 2;
    } else if (c === 0x2a /* * */) {
      wildcards += 1;
      tokens.push({ kind: 'star' });
      i += 1;
    } else if (c === 0x3f /* ? */) {
      wildcards += 1;
      tokens.push({ kind: 'any' });
      i += 1;
    } else if (c === 0x5b /* [ */) {
      const cls = parseClass(cps, i);
      if (typeof cls === 'string') return cls;
      wildcards += 1;
      tokens.push(cls.token);
      i = cls.end;
    } else {
      tokens.push({ kind: 'char', cp: c });
      i += 1;
    }
  }
  if (wildcards > MAX_GLOB_WILDCARDS) return `more than ${MAX_GLOB_WILDCARDS} wildcards (* ? [..])`;
  return tokens;
}

/** Parses the class starting at `start` (a `[`): its token and the index after its `]`, or a reason. */
function parseClass(cps: number[], start: number): { token: Token; end: number } | string {
  let i = start + 1;
  let negated = false;
  if (cps[i] === 0x5e /* ^ */ || cps[i] === 0x21 /* ! */) {
    negated = true;
    i += 1;
  }
  const ranges: Array<[number, number]> = [];
  for (;;) {
    if (i >= cps.length) return `unclosed '[' at position ${start + 1}`;
    if (cps[i] === 0x5d /* ] */ && ranges.length > 0) {
      return { token: { kind: 'class', negated, ranges }, end: i + 1 };
    }
    const lo = classChar(cps, i);
    if (typeof lo === 'string') return lo;
    i = lo.next;
    let hi = lo.cp;
    if (cps[i] === 0x2d /* - */) {
      const h = classChar(cps, i + 1);
      if (typeof h === 'string') return h;
      // Go accepts a reversed range and never matches it; it is always a mistake, so it is reported.
      if (h.cp < lo.cp) return `reversed range in '[' at position ${start + 1}`;
      hi = h.cp;
      i = h.next;
    }
    ranges.push([lo.cp, hi]);
  }
}

/** One character inside a class (escapes allowed); `-` and `]` must be escaped where a character is due. */
function classChar(cps: number[], i: number): { next: number; cp: number } | string {
  const c = cps[i];
  if (c === undefined) return "unclosed '['";
  if (c === 0x2d || c === 0x5d) return `unescaped '${String.fromCodePoint(c)}' in a character class`;
  if (c === 0x5c) {
    if (i + 1 >= cps.length) return 'ends with an escaping \\';
    return { next: i + 2, cp: cps[i + 1]! };
  }
  return { next: i + 1, cp: c };
}

/** Returns why `glob` is malformed under Go's rules or over the size bounds, or null when it is accepted. */
export function globError(glob: string): string | null {
  const parsed = parseGlob(glob);
  return typeof parsed === 'string' ? parsed : null;
}

/** True when the glob has no wildcard or class: it matches exactly one string. */
export function isLiteral(glob: string): boolean {
  return !/[*?[]/.test(glob.replace(/\\./gu, ''));
}

/** The one string a literal glob matches (escapes removed). */
export function literalValue(glob: string): string {
  return glob.replace(/\\(.)/gu, '$1');
}

/** Whether one non-star token takes the character `cp`. */
function takes(t: Token, cp: number, slash = false): boolean {
  switch (t.kind) {
    case 'char':
      return t.cp === cp;
    case 'any':
      return cp !== SLASH || slash;
    case 'class': {
      let inside = false;
      for (const [lo, hi] of t.ranges) {
        if (lo <= cp && cp <= hi) {
          inside = true;
          break;
        }
      }
      return inside !== t.negated;
    }
    case 'star':
      return false;
  }
}

/** How a glob treats `/`. */
export interface GlobOptions {
  /**
   * `*` and `?` match `/` too: for values that are not paths split into segments, such as a tool's input
   * line (`rm -rf *` must match `rm -rf /tmp/x`, docs/APPROVALS.md).
   */
  slash?: boolean;
}

/**
 * Compiles a glob into a predicate, or returns why it is not accepted (the same reason globError gives).
 * Literal globs become a string comparison, the common case (`room=-5075870332`).
 */
export function tryCompileGlob(glob: string, opts: GlobOptions = {}): GlobTest | { error: string } {
  const tokens = parseGlob(glob);
  if (typeof tokens === 'string') return { error: tokens };
  if (isLiteral(glob)) {
    const lit = literalValue(glob);
    return (value) => value === lit;
  }
  const n = tokens.length;
  const star = tokens.map((t) => t.kind === 'star');
  // Follows the epsilon moves: a position at a star may also be past it (the star matched nothing).
  const close = (set: Uint8Array) => {
    for (let i = 0; i < n; i++) if (set[i] && star[i]) set[i + 1] = 1;
  };
  return (value) => {
    let cur = new Uint8Array(n + 1);
    let next = new Uint8Array(n + 1);
    cur[0] = 1;
    close(cur);
    for (const ch of value) {
      const cp = ch.codePointAt(0)!;
      next.fill(0);
      let alive = false;
      for (let i = 0; i < n; i++) {
        if (!cur[i]) continue;
        if (star[i]) {
          if (cp !== SLASH || opts.slash) {
            next[i] = 1;
            alive = true;
          }
        } else if (takes(tokens[i]!, cp, opts.slash)) {
          next[i + 1] = 1;
          alive = true;
        }
      }
      if (!alive) return false;
      close(next);
      [cur, next] = [next, cur];
    }
    return cur[n] === 1;
  };
}

/** Compiles a glob that globError accepted; throws a named error on one it does not. */
export function compileGlob(glob: string): GlobTest {
  const compiled = tryCompileGlob(glob);
  if (typeof compiled === 'function') return compiled;
  throw new GlobError(glob, compiled.error);
}

/** A glob that is malformed or over the bounds. */
export class GlobError extends Error {
  constructor(
    readonly glob: string,
    readonly reason: string,
  ) {
    super(`malformed glob '${glob.slice(0, 64)}': ${reason}`);
    this.name = 'GlobError';
  }
}
