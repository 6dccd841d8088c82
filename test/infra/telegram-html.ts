/**
 * A strict checker of Telegram's HTML subset (Bot API "HTML style"), for the local Bot API server: what
 * it refuses, Telegram would refuse too (or render wrongly). Tags: b strong i em u ins s strike del
 * tg-spoiler, span class="tg-spoiler", a href, code, pre, code class="language-…" directly inside pre,
 * blockquote [expandable]; entities &lt; &gt; &amp; &quot; and numeric ones; every other `<`, `>` and `&`
 * must be escaped; tags nest properly and are all closed; nothing but code nests inside pre or code.
 */

const SIMPLE = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'tg-spoiler']);

/** Null when Telegram would accept `html`; else the reason, worded like the Bot API's 400 description. */
export function checkTelegramHtml(html: string): string | null {
  const stack: string[] = [];
  let i = 0;
  while (i < html.length) {
    const c = html[i]!;
    if (c === '&') {
      const m = /^&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});/.exec(html.slice(i, i + 12));
      if (!m) return `can't parse entities: unsupported entity at byte offset ${i}`;
      i += m[0].length;
      continue;
    }
    if (c === '>') return `can't parse entities: unescaped '>' at byte offset ${i}`;
    if (c !== '<') {
      i++;
      continue;
    }
    const end = html.indexOf('>', i);
    if (end < 0) return `can't parse entities: unclosed start tag at byte offset ${i}`;
    const tag = html.slice(i + 1, end);
    const close = /^\/([a-z-]+)$/.exec(tag);
    if (close) {
      if (stack.pop() !== close[1])
        return `can't parse entities: unmatched end tag "${close[1]}" at byte offset ${i}`;
      i = end + 1;
      continue;
    }
    const open = /^([a-z-]+)((?:\s+[a-z-]+(?:="[^"<>&]*(?:&(?:lt|gt|amp|quot);[^"<>&]*)*")?)*)\s*$/.exec(tag);
    if (!open) return `can't parse entities: bad tag at byte offset ${i}`;
    const name = open[1]!;
    const attrs = Object.fromEntries(
      [...open[2]!.matchAll(/([a-z-]+)(?:="([^"]*)")?/g)].map((a) => [a[1]!, a[2] ?? '']),
    );
    const parent = stack.at(-1);
    if (parent === 'code' || (parent === 'pre' && name !== 'code'))
      return `can't parse entities: tag "${name}" inside "${parent}" at byte offset ${i}`;
    const keys = Object.keys(attrs);
    const okAttrs =
      SIMPLE.has(name) || name === 'pre'
        ? keys.length === 0
        : name === 'span'
          ? keys.length === 1 && attrs.class === 'tg-spoiler'
          : name === 'a'
            ? keys.length === 1 && /^(https?|mailto|tg):/.test(attrs.href ?? '')
            : name === 'code'
              ? keys.length === 0 ||
                (parent === 'pre' && keys.length === 1 && /^language-[\w+#.-]+$/.test(attrs.class ?? ''))
              : name === 'blockquote'
                ? keys.every((k) => k === 'expandable')
                : false;
    if (!okAttrs) return `can't parse entities: unsupported start tag "${tag}" at byte offset ${i}`;
    stack.push(name);
    i = end + 1;
  }
  if (stack.length > 0)
    return `can't parse entities: can't find end tag corresponding to start tag "${stack.at(-1)}"`;
  return null;
}
