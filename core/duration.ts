import { UsageError } from './errors.js';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

// One `<n><unit>` piece; `ms` is tried before `m` so `500ms` is not read as 500 minutes and a stray `s`.
const PIECE = /(\d+)(ms|s|m|h|d)/y;

/**
 * Parses a duration written as `<n>(ms|s|m|h|d)` pieces, concatenated: `15m`, `2h`, `1h30m`, `1d12h`,
 * `1500ms`. Whitespace and signs are not allowed, a unit is required, and the total must be positive and
 * at most 10 years (anything longer is a typo, not a schedule). Throws a UsageError naming the input.
 */
export function parseDuration(text: string): number {
  const bad = (why: string) =>
    new UsageError(`bad duration '${text}': ${why} (write <n>(ms|s|m|h|d) pieces, e.g. 15m or 1h30m)`);
  if (text === '') throw bad('empty');
  let total = 0;
  PIECE.lastIndex = 0;
  while (PIECE.lastIndex < text.length) {
    const at = PIECE.lastIndex;
    const m = PIECE.exec(text);
    if (!m) throw bad(`unexpected '${text.slice(at)}'`);
    total += Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  }
  if (total <= 0) throw bad('must be longer than 0');
  if (total > 10 * 365 * UNIT_MS.d) throw bad('longer than 10 years');
  return total;
}

/** Formats milliseconds the way parseDuration reads them, largest units first: 5400000 → `1h30m`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0ms';
  let rest = Math.round(ms);
  let out = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms'] as const) {
    const n = Math.floor(rest / UNIT_MS[unit]);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * UNIT_MS[unit];
    }
  }
  return out;
}
