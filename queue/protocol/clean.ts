/**
 * Removes the agent's private text from a result before it becomes a reply (docs/PROTOCOL.md): everything
 * inside `<internal>…</internal>` and `<think>…</think>`, nested in any mix, across lines. An unclosed
 * opening tag hides everything after it: leaking half a thought to a chat is worse than cutting a reply.
 * A stray closing tag is dropped. Tag names are matched case-insensitively.
 */

import { interruptedText } from '../../core/draft-markdown.js';

const TAG_RE = /<(\/?)(internal|think)\s*>/gi;

/** The visible part of an agent's result, trimmed; '' when nothing is left to say. */
export function cleanResult(text: string): string {
  let depth = 0;
  let out = '';
  let last = 0;
  for (const m of text.matchAll(TAG_RE)) {
    const at = m.index;
    if (depth === 0) out += text.slice(last, at);
    last = at + m[0].length;
    if (m[1] === '/') {
      if (depth > 0) depth--;
    } else {
      depth++;
    }
  }
  if (depth === 0) out += text.slice(last);
  return out.trim();
}

/**
 * What a block's `result` shows in the chat: its visible part, and for an interrupted turn's final block
 * the mark that it was cut (a draft of it is replaced by this text).
 */
export function replyText(result: string | null, interrupted: boolean): string {
  const said = result === null ? '' : cleanResult(result);
  return interrupted && said !== '' ? interruptedText(said) : said;
}
