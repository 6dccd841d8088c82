import type { RouteFields } from '../core/types.js';
import { isLiteral, literalValue, tryCompileGlob, type GlobTest } from './glob.js';

/** The fields a `match` may test, in the order explain reports them. */
export const MATCH_KEYS = ['platform', 'room', 'chat_jid', 'sender', 'verb'] as const;
export type MatchKey = (typeof MATCH_KEYS)[number];

/** One `key=glob` pair of a route's match, compiled. */
export interface Predicate {
  key: MatchKey;
  glob: string;
  test: GlobTest;
  /** Set when the glob matches exactly one string: lets the table index the route by it. */
  literal: string | undefined;
}

function isMatchKey(k: string): k is MatchKey {
  return (MATCH_KEYS as readonly string[]).includes(k);
}

/** A piece of a row quoted in an error: enough to find it, never the whole of a huge value. */
function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/**
 * Parses a route's `match` column: space-separated `key=glob` pairs, all of which must match; empty means
 * "everything". Returns the predicates or the first reason the text is invalid.
 */
export function parseMatch(match: string): Predicate[] | { error: string } {
  const preds: Predicate[] = [];
  const seen = new Set<string>();
  for (const token of match.split(/\s+/).filter(Boolean)) {
    const eq = token.indexOf('=');
    if (eq < 0) return { error: `token '${clip(token)}' has no '=' (expected key=glob)` };
    const key = token.slice(0, eq);
    const glob = token.slice(eq + 1);
    if (key === '') return { error: `token '${clip(token)}' has an empty key` };
    if (!isMatchKey(key)) return { error: `unknown key '${clip(key)}' (known: ${MATCH_KEYS.join(', ')})` };
    if (seen.has(key)) return { error: `duplicate key '${key}'` };
    seen.add(key);
    // Validation and matching use the same compiled form: an accepted glob cannot fail later.
    const test = tryCompileGlob(glob);
    if (typeof test !== 'function')
      return { error: `malformed glob '${clip(glob)}' for ${key}: ${test.error}` };
    preds.push({
      key,
      glob,
      test,
      literal: isLiteral(glob) ? literalValue(glob) : undefined,
    });
  }
  return preds;
}

/** The first predicate that rejects `fields`, or undefined when all match. */
export function firstMismatch(preds: readonly Predicate[], fields: RouteFields): Predicate | undefined {
  for (const p of preds) if (!p.test(fields[p.key])) return p;
  return undefined;
}
