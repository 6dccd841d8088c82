import { marked, type Token, type Tokens } from 'marked';

/**
 * Agents write Markdown; each platform gets it in its own language (docs/CHANNELS.md). This module reads
 * Markdown with marked's lexer (never regexes) and writes it out through one walker in three dialects:
 * Telegram's HTML subset, Slack's mrkdwn and plain text. Whatever HTML the agent wrote is shown as text, never passed on.
 */

/** How a dialect writes each construct; every argument is already written in that dialect. */
interface Dialect {
  text(s: string): string;
  strong(inner: string): string;
  em(inner: string): string;
  del(inner: string): string;
  code(s: string): string;
  pre(code: string, lang: string): string;
  link(href: string, inner: string, plainInner: string): string;
  quote(inner: string): string;
  heading(inner: string): string;
}

/** The characters Telegram's HTML parser requires escaped, in text and in attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Links a chat may open: web, mail and Telegram links. Anything else (javascript:, data:) becomes text. */
export function safeHref(href: string): string | null {
  try {
    const u = new URL(href);
    return ['http:', 'https:', 'mailto:', 'tg:'].includes(u.protocol) ? u.href : null;
  } catch {
    return null;
  }
}

const telegram: Dialect = {
  text: escapeHtml,
  strong: (s) => `<b>${s}</b>`,
  em: (s) => `<i>${s}</i>`,
  del: (s) => `<s>${s}</s>`,
  code: (s) => `<code>${escapeHtml(s)}</code>`,
  pre: (code, lang) => {
    const l = /^[\w+#.-]{1,32}$/.test(lang) ? ` class="language-${lang}"` : '';
    return `<pre><code${l}>${escapeHtml(code)}</code></pre>`;
  },
  link: (href, inner) => {
    const safe = safeHref(href);
    return safe ? `<a href="${escapeHtml(safe)}">${inner}</a>` : inner;
  },
  quote: (s) => `<blockquote>${s}</blockquote>`,
  heading: (s) => `<b>${s}</b>`,
};

const plain: Dialect = {
  text: (s) => s,
  strong: (s) => s,
  em: (s) => s,
  del: (s) => s,
  code: (s) => s,
  pre: (code) => code,
  link: (href, inner, plainInner) => {
    // Spelled out as written: the platform finds the address in the text and links it.
    if (!safeHref(href)) return inner;
    return plainInner === href || plainInner === '' ? href : `${inner} (${href})`;
  },
  quote: (s) =>
    s
      .split('\n')
      .map((l) => `> ${l}`)
      .join('\n'),
  heading: (s) => s,
};

/** The three characters Slack requires escaped in mrkdwn text (`<`, `>` open links and mentions). */
export function escapeMrkdwn(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const mrkdwn: Dialect = {
  text: escapeMrkdwn,
  strong: (s) => `*${s}*`,
  em: (s) => `_${s}_`,
  del: (s) => `~${s}~`,
  code: (s) => `\`${escapeMrkdwn(s)}\``,
  pre: (code) => `\`\`\`\n${escapeMrkdwn(code)}\n\`\`\``,
  link: (href, inner) => {
    // `<url|text>`: a `|` or `>` inside the text would end it early, so the text drops them.
    const safe = safeHref(href);
    return safe ? `<${safe.replace(/[|>]/g, encodeURIComponent)}|${inner.replace(/[|>]/g, ' ')}>` : inner;
  },
  quote: (s) =>
    s
      .split('\n')
      .map((l) => `> ${l}`)
      .join('\n'),
  heading: (s) => `*${s}*`,
};

function inline(tokens: readonly Token[] | undefined, d: Dialect): string {
  let out = '';
  for (const t of tokens ?? []) out += inlineToken(t, d);
  return out;
}

function inlineToken(t: Token, d: Dialect): string {
  switch (t.type) {
    case 'strong':
      return d.strong(inline((t as Tokens.Strong).tokens, d));
    case 'em':
      return d.em(inline((t as Tokens.Em).tokens, d));
    case 'del':
      return d.del(inline((t as Tokens.Del).tokens, d));
    case 'codespan':
      return d.code((t as Tokens.Codespan).text);
    case 'br':
      return '\n';
    case 'link': {
      const l = t as Tokens.Link;
      return d.link(l.href, inline(l.tokens, d), inline(l.tokens, plain));
    }
    case 'image': {
      const i = t as Tokens.Image;
      return d.link(i.href, d.text(i.text || i.href), i.text || i.href);
    }
    case 'text': {
      const x = t as Tokens.Text;
      return x.tokens ? inline(x.tokens, d) : d.text(x.text);
    }
    case 'escape':
    case 'html':
      // Raw HTML from the agent is text to show, not markup to obey.
      return d.text((t as Tokens.Escape | Tokens.HTML).text);
    default:
      return d.text('raw' in t && typeof t.raw === 'string' ? t.raw : '');
  }
}

function list(l: Tokens.List, d: Dialect, depth: number): string {
  const indent = '  '.repeat(depth);
  const start = typeof l.start === 'number' ? l.start : 1;
  return l.items
    .map((item, i) => {
      const mark = item.task ? (item.checked ? '☑' : '☐') : l.ordered ? `${start + i}.` : '•';
      const body = item.tokens
        .filter((t) => t.type !== 'checkbox')
        .map((t) =>
          t.type === 'list' ? '\n' + list(t as Tokens.List, d, depth + 1) : block(t, d, depth + 1),
        )
        .join('')
        .replace(/\n\n+/g, '\n');
      return `${indent}${d.text(mark)} ${body}`;
    })
    .join('\n');
}

/**
 * A table as a monospace block, its columns padded to one width and the header ruled off, so it reads as a
 * table wherever code blocks are monospace (Telegram, Slack) and stays legible as plain text.
 */
function table(t: Tokens.Table, d: Dialect): string {
  const texts = [t.header, ...t.rows].map((cells) => cells.map((c) => inline(c.tokens, plain)));
  const widths = t.header.map((_, i) => Math.max(...texts.map((r) => [...(r[i] ?? '')].length)));
  const pad = (s: string, i: number) => {
    const fill = ' '.repeat(widths[i]! - [...s].length);
    return t.align[i] === 'right' ? fill + s : s + fill;
  };
  const line = (r: string[]) =>
    widths
      .map((_, i) => pad(r[i] ?? '', i))
      .join(' | ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('-+-');
  return d.pre([line(texts[0]!), rule, ...texts.slice(1).map(line)].join('\n'), '');
}

function block(t: Token, d: Dialect, depth = 0): string {
  switch (t.type) {
    case 'space':
    case 'def':
      return '';
    case 'paragraph':
      return inline((t as Tokens.Paragraph).tokens, d);
    case 'heading':
      return d.heading(inline((t as Tokens.Heading).tokens, d));
    case 'code': {
      const c = t as Tokens.Code;
      return d.pre(c.text, (c.lang ?? '').split(/\s/)[0] ?? '');
    }
    case 'blockquote':
      return d.quote(blocks((t as Tokens.Blockquote).tokens, d).join('\n\n'));
    case 'list':
      return list(t as Tokens.List, d, depth);
    case 'hr':
      return d.text('———');
    case 'table':
      return table(t as Tokens.Table, d);
    case 'html':
      return d.text((t as Tokens.HTML).text.replace(/\n+$/, ''));
    case 'text': {
      const x = t as Tokens.Text;
      return x.tokens ? inline(x.tokens, d) : d.text(x.text);
    }
    default:
      return d.text('raw' in t && typeof t.raw === 'string' ? t.raw : '');
  }
}

function blocks(tokens: readonly Token[], d: Dialect): string[] {
  return tokens.map((t) => block(t, d)).filter((s) => s !== '');
}

function lex(markdown: string): Token[] {
  return marked.lexer(markdown, { gfm: true });
}

/**
 * Markdown as Telegram HTML (`parse_mode: HTML`), one string per top-level block (paragraph, list, code
 * block, quote…), each valid on its own: join them with a blank line, or split between them.
 */
export function telegramHtmlBlocks(markdown: string): string[] {
  return blocks(lex(markdown), telegram);
}

/**
 * Markdown as Slack mrkdwn (`*bold*`, `_italic_`, `<url|text>`, code fences), blocks joined by a blank line.
 * Whatever the agent wrote as `<…>` is escaped, so it cannot mention `<!channel>` or forge a link.
 */
export function markdownToMrkdwn(markdown: string): string {
  return blocks(lex(markdown), mrkdwn).join('\n\n');
}

/** Markdown as plain text: emphasis dropped, links as `text (url)`, lists with bullets, code as is. */
export function markdownToPlain(markdown: string): string {
  return blocks(lex(markdown), plain).join('\n\n');
}
