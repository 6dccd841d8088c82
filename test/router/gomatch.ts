/**
 * A reference implementation of Go's `path.Match`, written from its documented grammar, used only to
 * cross-check router/glob.ts on random patterns. Works on code points, as Go works on runes. Returns
 * true/false, or 'bad' for ErrBadPattern. Reversed ranges are reported as 'bad' here too, as router/glob.ts
 * rejects them. It backtracks (exponential on some patterns): it is a judge for short inputs only.
 */
export function goMatch(pattern: string, name: string): boolean | 'bad' {
  const p = Array.from(pattern);
  if (!wellFormed(p)) return 'bad';
  return matchFrom(p, 0, Array.from(name), 0);
}

function wellFormed(p: string[]): boolean {
  let i = 0;
  while (i < p.length) {
    if (p[i] === '\\') {
      if (i + 1 >= p.length) return false;
      i += 2;
    } else if (p[i] === '[') {
      const r = parseClass(p, i);
      if (!r) return false;
      i = r.end;
    } else i += 1;
  }
  return true;
}

interface Cls {
  end: number;
  negated: boolean;
  ranges: Array<[number, number]>;
}

function parseClass(p: string[], start: number): Cls | null {
  let i = start + 1;
  let negated = false;
  if (p[i] === '^' || p[i] === '!') {
    negated = true;
    i += 1;
  }
  const ranges: Array<[number, number]> = [];
  const esc = (): number | null => {
    const c = p[i];
    if (c === undefined || c === '-' || c === ']') return null;
    if (c === '\\') {
      if (i + 1 >= p.length) return null;
      i += 2;
      return p[i - 1]!.codePointAt(0)!;
    }
    i += 1;
    return p[i - 1]!.codePointAt(0)!;
  };
  for (;;) {
    if (i >= p.length) return null;
    if (p[i] === ']' && ranges.length > 0) return { end: i + 1, negated, ranges };
    const lo = esc();
    if (lo === null) return null;
    let hi = lo;
    if (p[i] === '-') {
      i += 1;
      const h = esc();
      if (h === null || h < lo) return null;
      hi = h;
    }
    ranges.push([lo, hi]);
  }
}

function matchFrom(p: string[], pi: number, s: string[], si: number): boolean {
  while (pi < p.length) {
    const c = p[pi]!;
    if (c === '*') {
      // Try every split that does not cross '/'.
      for (let k = si; k <= s.length; k++) {
        if (matchFrom(p, pi + 1, s, k)) return true;
        if (k < s.length && s[k] === '/') return false;
      }
      return false;
    }
    if (si >= s.length) return false;
    if (c === '?') {
      if (s[si] === '/') return false;
      pi += 1;
      si += 1;
    } else if (c === '[') {
      const cls = parseClass(p, pi)!;
      const ch = s[si]!.codePointAt(0)!;
      const inside = cls.ranges.some(([lo, hi]) => lo <= ch && ch <= hi);
      if (inside === cls.negated) return false;
      pi = cls.end;
      si += 1;
    } else {
      const lit = c === '\\' ? p[pi + 1]! : c;
      if (s[si] !== lit) return false;
      pi += c === '\\' ? 2 : 1;
      si += 1;
    }
  }
  return si === s.length;
}
