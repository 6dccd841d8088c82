import { parseJid, type RouteFields } from '../core/types.js';
import { MATCH_KEYS } from './match.js';
import type { ExplainLine } from './table.js';

/**
 * Builds route fields from `KEY=VALUE` words (as typed after `gated routes explain`). `chat_jid` is derived
 * from platform and room when absent, and platform and room from chat_jid; verb defaults to `message`.
 * Returns the fields or the reason the words are unusable.
 */
export function explainFields(words: readonly string[]): RouteFields | { error: string } {
  const given: Partial<Record<string, string>> = {};
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq <= 0) return { error: `'${w}' is not KEY=VALUE` };
    const key = w.slice(0, eq);
    if (!(MATCH_KEYS as readonly string[]).includes(key)) {
      return { error: `unknown key '${key}' (known: ${MATCH_KEYS.join(', ')})` };
    }
    given[key] = w.slice(eq + 1);
  }
  const fromJid = given.chat_jid !== undefined ? parseJid(given.chat_jid) : undefined;
  const platform = given.platform ?? fromJid?.platform ?? '';
  const room = given.room ?? fromJid?.room ?? '';
  return {
    platform,
    room,
    chat_jid: given.chat_jid ?? (platform || room ? `${platform}:${room}` : ''),
    sender: given.sender ?? '',
    verb: given.verb ?? 'message',
  };
}

/** Human lines for explain: one per row, then `target: <target>` or `target: none`. */
export function formatExplain(lines: readonly ExplainLine[]): string[] {
  const out = lines.map((l) => {
    const head = `#${l.row.id} seq=${l.row.seq} match='${l.row.match}' → ${l.row.target}:`;
    switch (l.verdict) {
      case 'matched':
        return `${head} MATCH`;
      case 'shadowed':
        return `${head} would match, but an earlier row already did`;
      case 'no-match':
        return `${head} no: ${l.key}='${l.value}' does not match '${l.glob}'`;
      case 'invalid':
        return `${head} invalid (never matches): ${l.reason}`;
    }
  });
  const hit = lines.find((l) => l.verdict === 'matched');
  out.push(`target: ${hit && hit.verdict === 'matched' ? hit.target : 'none'}`);
  return out;
}
