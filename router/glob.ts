/**
 * Globs with Go `path.Match` semantics: `*` (any run of non-`/` characters, including none), `?` (one
 * non-`/` character), `[abc]`, `[a-z]`, `[!abc]` / `[^abc]`, and `\` escaping the next character.
 * Case-sensitive; no braces, extglobs, globstar, POSIX classes or negation. A pattern Go calls malformed is
 * rejected (globError) rather than silently matching something.
 *
 * Patterns are translated to an anchored RegExp here rather than through picomatch: even with braces,
 * extglobs, globstar and negation switched off, picomatch lets `*` skip `.` and `..`, strips a leading `./`,
 * reads `[[:alpha:]]` as a POSIX class and also accepts a class's brackets literally (`[!a]` matches the
 * text "[!a]"), none of which Go does. test/router/glob-property.test.ts checks this translation against a
 * reference implementation of Go's algorithm on random patterns.
 */

/** A compiled glob: a predicate over one field value. */
export type GlobTest = (value: string) => boolean;

/** Returns why `glob` is malformed under Go's rules, or null when it is well-formed. */
export function globError(glob: string): string | null {
  let i = 0;
  while (i < glob.length) {
    const c = glob[i];
    if (c === '\\') {
      if (i + 1 >= glob.length) return 'ends with an escaping \\';
      i += 2;
    } else if (c === '[') {
      const end = classEnd(glob, i);
      if (typeof end === 'string') return end;
      i = end;
    } else {
      i += 1;
    }
  }
  return null;
}

/** Scans the class starting at `start` (a `[`); returns the index after its `]` or a reason. */
function classEnd(glob: string, start: number): number | string {
  let i = start + 1;
  if (glob[i] === '^' || glob[i] === '!') i += 1;
  let ranges = 0;
  for (;;) {
    if (i >= glob.length) return `unclosed '[' at position ${start + 1}`;
    if (glob[i] === ']' && ranges > 0) return i + 1;
    const lo = classChar(glob, i);
    if (typeof lo === 'string') return lo;
    i = lo.next;
    if (glob[i] === '-') {
      const hi = classChar(glob, i + 1);
      if (typeof hi === 'string') return hi;
      // Go accepts a reversed range and never matches it; it is always a mistake, so it is reported.
      if (hi.cp < lo.cp) return `reversed range in '[' at position ${start + 1}`;
      i = hi.next;
    }
    ranges += 1;
  }
}

/** One character inside a class (escapes allowed); `-` and `]` must be escaped where a character is due. */
function classChar(glob: string, i: number): { next: number; cp: number } | string {
  const c = glob[i];
  if (c === undefined) return "unclosed '['";
  if (c === '-' || c === ']') return `unescaped '${c}' in a character class`;
  if (c === '\\') {
    if (i + 1 >= glob.length) return 'ends with an escaping \\';
    return { next: i + 2, cp: glob.codePointAt(i + 1)! };
  }
  return { next: i + 1, cp: glob.codePointAt(i)! };
}

/** True when the glob has no wildcard or class: it matches exactly one string. */
export function isLiteral(glob: string): boolean {
  return !/[*?[]/.test(glob.replace(/\\./g, ''));
}

/** The one string a literal glob matches (escapes removed). */
export function literalValue(glob: string): string {
  return glob.replace(/\\(.)/g, '$1');
}

/**
 * Compiles a well-formed glob (check globError first) into a predicate. Literal globs become a string
 * comparison, the common case (`room=-5075870332`).
 */
export function compileGlob(glob: string): GlobTest {
  if (isLiteral(glob)) {
    const lit = literalValue(glob);
    return (value) => value === lit;
  }
  const re = new RegExp(`^${globSource(glob)}$`);
  return (value) => re.test(value);
}

const escapeRe = (c: string) => c.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');

/** The RegExp source of a well-formed glob. */
function globSource(glob: string): string {
  let out = '';
  let i = 0;
  while (i < glob.length) {
    const c = glob[i]!;
    if (c === '*') {
      out += '[^/]*';
      i += 1;
    } else if (c === '?') {
      out += '[^/]';
      i += 1;
    } else if (c === '\\') {
      out += escapeRe(glob[i + 1]!);
      i += 2;
    } else if (c === '[') {
      i += 1;
      let cls = '[';
      if (glob[i] === '^' || glob[i] === '!') {
        cls += '^';
        i += 1;
      }
      let first = true;
      while (first || glob[i] !== ']') {
        first = false;
        const ch = glob[i] === '\\' ? glob[(i += 1)]! : glob[i]!;
        cls += escapeRe(ch);
        i += 1;
        if (glob[i] === '-') {
          const hi = glob[i + 1] === '\\' ? glob[(i += 1) + 1]! : glob[i + 1]!;
          cls += '-' + escapeRe(hi);
          i += 2;
        }
      }
      out += cls + ']';
      i += 1;
    } else {
      out += escapeRe(c);
      i += 1;
    }
  }
  return out;
}
