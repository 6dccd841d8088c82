// Agent replies in the web chat: Markdown read by marked's lexer (served from node_modules) and built as
// DOM nodes with textContent. No string of the agent's ever goes through innerHTML, so HTML in a reply is
// shown as text and never runs; links open only http(s) and mailto addresses.
import { marked } from '/assets/vendor/marked.js';

function node(tag, children) {
  const n = document.createElement(tag);
  for (const c of children) n.append(c);
  return n;
}

function safeHref(href) {
  try {
    const u = new URL(href, window.location.href);
    return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
  } catch {
    return null;
  }
}

function inline(tokens) {
  return (tokens || []).map((t) => {
    switch (t.type) {
      case 'strong':
        return node('strong', inline(t.tokens));
      case 'em':
        return node('em', inline(t.tokens));
      case 'del':
        return node('del', inline(t.tokens));
      case 'codespan':
        return node('code', [t.text]);
      case 'br':
        return node('br', []);
      case 'link': {
        const href = safeHref(t.href);
        if (!href) return node('span', inline(t.tokens));
        const a = node('a', inline(t.tokens));
        a.href = href;
        a.rel = 'noopener noreferrer';
        a.target = '_blank';
        return a;
      }
      case 'text':
        return t.tokens ? node('span', inline(t.tokens)) : document.createTextNode(t.text);
      default:
        // escape, html (shown as typed), image (its alt text), anything new
        return document.createTextNode(t.type === 'image' ? t.text || t.href : (t.text ?? t.raw ?? ''));
    }
  });
}

function block(t) {
  switch (t.type) {
    case 'space':
    case 'def':
      return null;
    case 'paragraph':
      return node('p', inline(t.tokens));
    case 'heading':
      // # → h3 … ### and deeper → h5: headings inside a chat line, smaller than the page's own.
      return node(`h${Math.min(5, t.depth + 2)}`, inline(t.tokens));
    case 'table':
      return table(t);
    case 'code': {
      const code = node('code', [t.text]);
      return node('pre', [code]);
    }
    case 'blockquote':
      return node('blockquote', blocks(t.tokens));
    case 'list': {
      const list = node(
        t.ordered ? 'ol' : 'ul',
        t.items.map((i) => node('li', blocks(i.tokens))),
      );
      if (t.ordered && typeof t.start === 'number') list.start = t.start;
      return list;
    }
    case 'text':
      return t.tokens ? node('span', inline(t.tokens)) : document.createTextNode(t.text);
    case 'hr':
      return node('hr', []);
    default:
      // html blocks: the text as the agent wrote it
      return node('p', [t.raw ?? '']);
  }
}

/** A Markdown table as a <table> (in a box that scrolls sideways when it is wider than the line). */
function table(t) {
  const cell = (tag, c, align) => {
    const n = node(tag, inline(c.tokens));
    if (align) n.style.textAlign = align;
    return n;
  };
  const head = node('thead', [
    node(
      'tr',
      t.header.map((c, i) => cell('th', c, t.align[i])),
    ),
  ]);
  const rows = t.rows.map((r) =>
    node(
      'tr',
      r.map((c, i) => cell('td', c, t.align[i])),
    ),
  );
  const box = node('div', [node('table', [head, node('tbody', rows)])]);
  box.className = 'md-table';
  return box;
}

function blocks(tokens) {
  return tokens.map(block).filter((n) => n !== null);
}

/** A reply's Markdown as a <span class="text md"> of DOM nodes. */
export function markdownNode(text) {
  const span = node('span', blocks(marked.lexer(text, { gfm: true })));
  span.className = 'text md';
  return span;
}
