/**
 * Splits a reply into parts a platform accepts. Pure and deterministic: delivery resumes a split reply by
 * part index after a restart, so the same text and limit must always give the same parts.
 *
 * Cut preference: a paragraph break, then a line break, then a space, each taken only when it keeps at least
 * half of the window; then any of those boundaries at all; then, for a code block longer than the limit, a
 * cut inside the block that closes the fence at the end of the part and reopens it (with its info string)
 * at the start of the next; last, a hard cut on a grapheme boundary. A cut never lands inside a ``` block
 * when a boundary outside it exists.
 */

/** How a platform counts its limit: UTF-16 code units (`chars`) or user-perceived characters. */
export type LimitUnit = 'chars' | 'graphemes';

const FENCE_CLOSE = '\n```';
// Made at first use: building it loads ICU's break rules (about 20 ms), which a CLI call never needs.
let graphemes: Intl.Segmenter | undefined;
const segmenter = {
  segment: (s: string) =>
    (graphemes ??= new Intl.Segmenter(undefined, { granularity: 'grapheme' })).segment(s),
};

/** Number of graphemes in `s` (what Bluesky counts). */
export function graphemeLength(s: string): number {
  let n = 0;
  for (const _ of segmenter.segment(s)) n += 1;
  return n;
}

/** Length of `s` in `unit`. */
export function measure(s: string, unit: LimitUnit): number {
  return unit === 'graphemes' ? graphemeLength(s) : s.length;
}

/**
 * The largest string index i such that s.slice(0, i) fits in `limit` units and ends on a grapheme boundary
 * (so a surrogate pair, an emoji sequence or a combining mark is never torn).
 */
function fitIndex(s: string, limit: number, unit: LimitUnit): number {
  if (limit <= 0) return 0;
  if (unit === 'chars') return graphemeBoundaryAtOrBefore(s, Math.min(limit, s.length));
  let end = 0;
  let count = 0;
  for (const { segment, index } of segmenter.segment(s)) {
    count += 1;
    if (count > limit) break;
    end = index + segment.length;
  }
  return end;
}

/**
 * The last grapheme boundary at or before i, found by segmenting only a short stretch around i: splitting
 * long text by code units must stay linear. A cluster longer than the stretch (zalgo text) is cut between
 * code points.
 */
function graphemeBoundaryAtOrBefore(s: string, i: number): number {
  if (i >= s.length || i === 0) return i;
  const from = Math.max(0, i - 64);
  let best = -1;
  for (const { index } of segmenter.segment(s.slice(from, Math.min(s.length, i + 16)))) {
    const b = from + index;
    if (b > i) break;
    if (b > from || from === 0) best = b;
  }
  if (best > 0) return best;
  const code = s.charCodeAt(i);
  return code >= 0xdc00 && code <= 0xdfff ? i - 1 : i;
}

interface Fence {
  /** Index where the opening line starts. */
  start: number;
  /** Index just after the opening line (before its newline). */
  openerEnd: number;
  /** Index just after the closing fence line, or the end of the text when unclosed. */
  end: number;
  opener: string;
}

function findFences(s: string): Fence[] {
  const fences: Fence[] = [];
  let open: { start: number; openerEnd: number; opener: string } | null = null;
  let lineStart = 0;
  while (lineStart <= s.length) {
    const nl = s.indexOf('\n', lineStart);
    const lineEnd = nl < 0 ? s.length : nl;
    const line = s.slice(lineStart, lineEnd);
    if (line.trimStart().startsWith('```')) {
      if (open) {
        fences.push({ ...open, end: lineEnd });
        open = null;
      } else {
        open = { start: lineStart, openerEnd: lineEnd, opener: line.trim() };
      }
    }
    if (nl < 0) break;
    lineStart = nl + 1;
  }
  if (open) fences.push({ ...open, end: s.length });
  return fences;
}

/** The fence whose body contains index i (between its opener line and its closing line). */
function fenceAt(fences: Fence[], i: number): Fence | undefined {
  return fences.find((f) => i > f.start && i < f.end);
}

type Tier = 'para' | 'line' | 'space';

/** Last cut position p in (from, max] for the tier: the index where the boundary whitespace begins. */
function lastBoundary(s: string, tier: Tier, from: number, max: number, ok: (p: number) => boolean): number {
  const re = tier === 'para' ? /\n[ \t]*\n/g : tier === 'line' ? /\n/g : /[ \t]+/g;
  let best = -1;
  for (const m of s.slice(0, max + 1).matchAll(re)) {
    const p = m.index;
    if (p > from && p <= max && ok(p)) best = p;
  }
  return best;
}

/** Splits `text` into parts of at most `limit` units each (see the file comment for the cut rules). */
export function splitText(text: string, limit: number, unit: LimitUnit = 'chars'): string[] {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`split limit must be a positive integer`);
  const parts: string[] = [];
  let reopen = '';
  const body = text.replace(/\s+$/, '');
  let pos = skipBlankLines(body, 0);
  while (pos < body.length) {
    // Bounded window: never more than the limit needs, so a 10 MiB reply splits in linear time.
    let windowLen = limit + 1;
    let s = reopen + body.slice(pos, pos + windowLen);
    // Plain ASCII has a grapheme per character ("\r\n" counts as two, which only errs on the short side),
    // so Intl.Segmenter, slow per grapheme, is needed only for windows with other characters.
    const u: LimitUnit = unit === 'graphemes' && !ASCII.test(s) ? 'graphemes' : 'chars';
    if (u === 'graphemes') {
      windowLen = limit * 2 + 64;
      s = reopen + body.slice(pos, pos + windowLen);
      while (pos + windowLen < body.length && graphemeLength(s) <= limit) {
        windowLen *= 2;
        s = reopen + body.slice(pos, pos + windowLen);
      }
    }
    const reachesEnd = pos + windowLen >= body.length;
    if (reachesEnd && measure(s, u) <= limit) {
      parts.push(s);
      break;
    }
    const cut = chooseCut(s, limit, u, reopen.length);
    const piece = s.slice(0, cut.at).replace(/\s+$/, '') + (cut.close ? FENCE_CLOSE : '');
    if (piece.trim() !== '') parts.push(piece);
    // Map the cut back to the original text (the window began with the reopened fence line).
    pos += cut.resume - reopen.length;
    reopen = cut.reopen ? `${cut.reopen}\n` : '';
    if (!cut.reopen) pos = skipBlankLines(body, pos);
  }
  return parts;
}

const BLANK_LINES = /(?:[ \t]*\n)+/y;
// Every character below U+0080 is its own grapheme, so ASCII text needs no segmenter.
// eslint-disable-next-line no-control-regex
const ASCII = /^[\x00-\x7f]*$/;

/** Index after the blank lines starting at `pos` (a sticky regex, so no copy of the rest of the text). */
function skipBlankLines(s: string, pos: number): number {
  BLANK_LINES.lastIndex = pos;
  return BLANK_LINES.exec(s) ? BLANK_LINES.lastIndex : pos;
}

interface Cut {
  /** Where the part ends (exclusive). */
  at: number;
  /** Where the rest begins. */
  resume: number;
  /** Close the fence at the end of this part. */
  close: boolean;
  /** The fence opener to repeat at the start of the next part, or ''. */
  reopen: string;
}

function chooseCut(s: string, limit: number, unit: LimitUnit, minProgress: number): Cut {
  const max = fitIndex(s, limit, unit);
  const fences = findFences(s);
  const outside = (p: number) => fenceAt(fences, p) === undefined;
  const skip = (p: number, tier: Tier) => {
    if (tier === 'space') return p + (/^[ \t]+/.exec(s.slice(p))?.[0].length ?? 1);
    return p + 1;
  };
  const tiers: Tier[] = ['para', 'line', 'space'];
  for (const tier of tiers) {
    const p = lastBoundary(s, tier, Math.max(minProgress, Math.floor(max / 2)), max, outside);
    if (p > 0) return { at: p, resume: skip(p, tier), close: false, reopen: '' };
  }
  for (const tier of tiers) {
    const p = lastBoundary(s, tier, minProgress, max, outside);
    if (p > 0) return { at: p, resume: skip(p, tier), close: false, reopen: '' };
  }
  const inFence = fenceAt(fences, max);
  const room = fitIndex(s, limit - FENCE_CLOSE.length, unit);
  if (inFence && room > inFence.openerEnd + 1) {
    const from = inFence.openerEnd;
    const inside = (p: number) => fenceAt(fences, p) === inFence;
    const line = lastBoundary(s, 'line', from, room, inside);
    if (line > 0) return { at: line, resume: line + 1, close: true, reopen: inFence.opener };
    const space = lastBoundary(s, 'space', from + 1, room, inside);
    if (space > 0) return { at: space, resume: space, close: true, reopen: inFence.opener };
    return { at: room, resume: room, close: true, reopen: inFence.opener };
  }
  // No boundary at all: a hard cut on a grapheme boundary, always making progress.
  const at = Math.max(max, minProgress + 1, 1);
  return { at, resume: at, close: false, reopen: '' };
}

/**
 * `text` cut to at most `maxBytes` bytes of UTF-8, on a code point boundary, with a note saying how much
 * was left out (the note fits inside the bound; under a bound too small for it, a bare `…`, and under 3
 * bytes no mark at all). Text already within the bound is returned as is.
 */
export function clipBytes(text: string, maxBytes: number): string {
  const size = Buffer.byteLength(text, 'utf8');
  const bound = Math.max(0, Math.floor(maxBytes));
  if (size <= bound) return text;
  const full = `\n[… ${size} bytes in all, cut to ${bound}]`;
  const note = [full, '…', ''].find((n) => Buffer.byteLength(n, 'utf8') <= bound) ?? '';
  const room = bound - Buffer.byteLength(note, 'utf8');
  const buf = Buffer.from(text.slice(0, room), 'utf8').subarray(0, room);
  // Drop a code point cut in half at the end (a continuation byte run without its end).
  let end = buf.length;
  let back = end - 1;
  while (back >= 0 && (buf[back]! & 0xc0) === 0x80) back -= 1;
  if (back >= 0) {
    const lead = buf[back]!;
    const len = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (back + len > end) end = back;
  }
  return buf.subarray(0, end).toString('utf8') + note;
}

/** A value quoted in a log line or an answer: at most `max` characters, marked when cut. */
export function clipText(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
