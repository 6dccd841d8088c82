import { telegramHtmlBlocks } from './markdown.js';

/**
 * Telegram HTML in parts: each part is at most `limit` characters of HTML and valid on its own (every tag it
 * opens it closes; a tag open at a cut is closed before it and opened again after it). Pure and
 * deterministic, as delivery resumes split replies by part index. Also the plain-text fallback for a part
 * Telegram refuses to parse.
 */

/** One piece of HTML: a tag or a character / entity of text. */
type Atom =
  | { kind: 'open'; name: string; raw: string }
  | { kind: 'close'; name: string }
  | { kind: 'text'; raw: string };

const ATOM = /<\/([a-z-]+)>|<([a-z-]+)(?:\s[^>]*)?>|&[#a-z0-9]+;|[\s\S]/giu;

function atoms(html: string): Atom[] {
  const out: Atom[] = [];
  for (const m of html.matchAll(ATOM)) {
    if (m[1]) out.push({ kind: 'close', name: m[1].toLowerCase() });
    else if (m[2]) out.push({ kind: 'open', name: m[2].toLowerCase(), raw: m[0] });
    else out.push({ kind: 'text', raw: m[0] });
  }
  return out;
}

const closing = (stack: readonly Atom[]) =>
  [...stack]
    .reverse()
    .map((a) => `</${(a as { name: string }).name}>`)
    .join('');
const opening = (stack: readonly Atom[]) => stack.map((a) => (a as { raw: string }).raw).join('');

/** Splits one block of Telegram HTML longer than `limit` at line breaks where it can, balancing tags. */
function splitBlock(html: string, limit: number): string[] {
  const parts: string[] = [];
  let stack: Atom[] = [];
  let body = '';
  let prefix = '';
  // The last line break and the last space in the current part: where to cut, and the open tags there.
  let lastBreak: { at: number; stack: Atom[] } | null = null;
  let lastSpace: { at: number; stack: Atom[] } | null = null;
  const flush = (at: number, open: Atom[]) => {
    parts.push(prefix + body.slice(0, at) + closing(open));
    const rest = body.slice(at);
    prefix = opening(open);
    body = '';
    return rest;
  };
  const pending: Atom[] = atoms(html);
  for (let i = 0; i < pending.length; i++) {
    const a = pending[i]!;
    const raw = a.kind === 'close' ? `</${a.name}>` : a.raw;
    // Room needed: what is written, this atom, and the closing tags the part would then need.
    const after = a.kind === 'open' ? [...stack, a] : a.kind === 'close' ? stack.slice(0, -1) : stack;
    if (prefix.length + body.length + raw.length + closing(after).length > limit && body.length > 0) {
      const half = body.length / 2;
      const cut =
        lastBreak && lastBreak.at > half
          ? lastBreak
          : lastSpace && lastSpace.at > half
            ? lastSpace
            : { at: body.length, stack };
      const rest = flush(cut.at, cut.stack);
      lastBreak = null;
      lastSpace = null;
      // Whatever followed the break is written again after the reopened tags.
      const replay = atoms(rest);
      pending.splice(i, 0, ...replay);
      stack = [...cut.stack];
      i--;
      continue;
    }
    body += raw;
    if (a.kind === 'open') stack.push(a);
    else if (a.kind === 'close') stack.pop();
    else if (a.raw === '\n') lastBreak = { at: body.length, stack: [...stack] };
    else if (a.raw === ' ') lastSpace = { at: body.length, stack: [...stack] };
  }
  if (body !== '') parts.push(prefix + body + closing(stack));
  return parts;
}

/**
 * Markdown as Telegram HTML parts of at most `limit` characters: whole blocks packed together where they
 * fit (joined by a blank line), a block longer than the limit split on its own.
 */
export function telegramHtmlParts(markdown: string, limit: number): string[] {
  const parts: string[] = [];
  let current = '';
  for (const block of telegramHtmlBlocks(markdown)) {
    const joined = current === '' ? block : `${current}\n\n${block}`;
    if (joined.length <= limit) {
      current = joined;
      continue;
    }
    if (current !== '') parts.push(current);
    current = '';
    if (block.length <= limit) current = block;
    else {
      const pieces = splitBlock(block, limit);
      current = pieces.pop() ?? '';
      parts.push(...pieces);
    }
  }
  if (current.trim() !== '') parts.push(current);
  return parts;
}

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"' };

/**
 * The text a Telegram HTML part shows, for sending it again without parse_mode: tags dropped, a link's
 * address kept after its text, entities decoded.
 */
export function telegramHtmlToPlain(html: string): string {
  return html
    .replace(/<a\s+href="([^"]*)"\s*>([\s\S]*?)<\/a>/gi, (_m, href: string, text: string) =>
      text === href ? href : `${text} (${href})`,
    )
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) => {
      if (e[0] === '#') {
        const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
        return Number.isFinite(code) ? String.fromCodePoint(code) : m;
      }
      return ENTITIES[e.toLowerCase()] ?? m;
    });
}
