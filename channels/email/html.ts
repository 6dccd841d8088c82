import { Marked, type Tokens } from 'marked';
import { escapeHtml, safeHref } from '../../core/markdown.js';

/**
 * The text/html part of a sent mail: the agent's Markdown rendered by marked, with every piece of HTML the
 * agent wrote shown as text (never markup a mail client would obey), links kept only for web and mail
 * addresses, and images shown as links (a remote image would tell its host that the mail was read).
 */
const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(text);
    },
    link(this: { parser: { parseInline(t: Tokens.Link['tokens']): string } }, token: Tokens.Link): string {
      const inner = this.parser.parseInline(token.tokens);
      const safe = safeHref(token.href);
      return safe && /^(https?|mailto):/.test(safe) ? `<a href="${escapeHtml(safe)}">${inner}</a>` : inner;
    },
    image({ href, text }: Tokens.Image): string {
      const safe = safeHref(href);
      const label = escapeHtml(text || href);
      return safe && /^https?:/.test(safe) ? `<a href="${escapeHtml(safe)}">${label}</a>` : label;
    },
  },
});

/** A whole HTML document for one part of a reply written in Markdown. */
export function mailHtml(markdown: string): string {
  const body = marked.parse(markdown, { async: false });
  return `<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>${body}</body></html>`;
}
