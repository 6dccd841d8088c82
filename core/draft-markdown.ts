/**
 * A draft is Markdown cut anywhere: inside `**`, inside a code fence, in a table's header before its
 * delimiter row. Rendered as it is, the open constructs show as raw markup (`**bold`, pipes, a fence) until
 * the text that closes them arrives. `draftMarkdown` closes or holds back what is open at the end, so a
 * draft renders like the answer will (docs/CHANNELS.md, "Drafts"). The result is only shown, never stored.
 */

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const TABLE_LINE = /^\s*\|/;
const DELIMITER_ROW = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** `text` with what is open at its end closed (a fence, a code span, emphasis) or held back (a table head). */
export function draftMarkdown(text: string): string {
  const lines = text.split('\n');
  // An open fence: everything after it is code, closed at the end with the same marker.
  let open: string | null = null;
  for (const line of lines) {
    const m = FENCE.exec(line);
    if (!m) continue;
    if (open === null) open = m[1]![0]!.repeat(3);
    else if (m[1]!.startsWith(open)) open = null;
  }
  if (open !== null) return `${text}\n${open}`;
  // A heading mark with no words yet, and table lines at the end with no delimiter row yet (not a table
  // yet): held back until the rest comes.
  while (lines.length > 0 && lines.at(-1)!.trim() === '') lines.pop();
  if (lines.length > 0 && /^ {0,3}#{1,6}\s*$/.test(lines.at(-1)!)) lines.pop();
  let end = lines.length;
  while (end > 0 && TABLE_LINE.test(lines[end - 1]!)) end--;
  const tail = lines.slice(end);
  const cells = (l: string) => l.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').length;
  const isTable = tail.length > 1 && DELIMITER_ROW.test(tail[1]!) && cells(tail[1]!) === cells(tail[0]!);
  const kept = tail.length > 0 && !isTable ? lines.slice(0, end) : lines;
  const body = kept.join('\n').replace(/\s+$/, '');
  const cut = body.lastIndexOf('\n\n');
  return body.slice(0, cut + 1) + closeInline(body.slice(cut + 1));
}

/** The last block of a draft with an open code span or emphasis at its end closed (or a bare opener dropped). */
function closeInline(block: string): string {
  const spans = block.replace(/`[^`\n]*`/g, '');
  if ((spans.match(/`/g) ?? []).length % 2 === 1) {
    return block.endsWith('`') ? block.slice(0, -1).trimEnd() : `${block}\``;
  }
  // Bullets are not emphasis.
  const bare = spans.replace(/^\s*[*+-]\s/gm, '');
  let out = block;
  const doubles = (bare.match(/\*\*/g) ?? []).length;
  if (doubles % 2 === 1) {
    if (out.endsWith('**')) return out.slice(0, -2).trimEnd();
    // `**bold*`: the closing pair is half written.
    return out.endsWith('*') ? `${out}*` : `${out}**`;
  }
  const singles = (bare.replace(/\*\*/g, '').match(/\*/g) ?? []).length;
  if (singles % 2 === 1) out = out.endsWith('*') ? out.slice(0, -1).trimEnd() : `${out}*`;
  return out;
}

/** What ends a reply whose turn was interrupted (docs/PROTOCOL.md, "Steering"): the cut is visible. */
export const INTERRUPTED_MARK = '…(interrupted)';

/**
 * The final text of an interrupted turn: what it had, with a fence it left open closed (else the mark
 * and everything after would render as code), then the mark on a line of its own. Nothing is held back:
 * unlike a draft, this text is stored and stays.
 */
export function interruptedText(text: string): string {
  let open: string | null = null;
  for (const line of text.split('\n')) {
    const m = FENCE.exec(line);
    if (!m) continue;
    if (open === null) open = m[1]![0]!.repeat(3);
    else if (m[1]!.startsWith(open)) open = null;
  }
  return `${text.trimEnd()}${open !== null ? `\n${open}` : ''}\n\n${INTERRUPTED_MARK}`;
}
