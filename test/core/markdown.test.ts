import { describe, expect, it } from 'vitest';
import { markdownToPlain, telegramHtmlBlocks } from '../../core/markdown.js';
import { telegramHtmlParts, telegramHtmlToPlain } from '../../core/telegram-html.js';
import { partsFor } from '../../delivery/format.js';
import { checkTelegramHtml } from '../infra/telegram-html.js';

const SAMPLE = [
  'Hi **bold <x> & y**, _it_, ~~gone~~ and `a<b && c`.',
  '',
  '# A title',
  '',
  '- one',
  '- two with a [link](https://example.org/?a=1&b=2)',
  '  1. nested',
  '',
  '```ts',
  'if (a < b && c > d) return "x";',
  '```',
  '',
  '<script>alert(1)</script>',
  '',
  '> quoted *words*',
  '',
  '[click](javascript:alert(1))',
].join('\n');

describe('Markdown to Telegram HTML', () => {
  it('converts each construct and escapes everything else', () => {
    const html = telegramHtmlBlocks(SAMPLE).join('\n\n');
    expect(html).toContain(
      'Hi <b>bold &lt;x&gt; &amp; y</b>, <i>it</i>, <s>gone</s> and <code>a&lt;b &amp;&amp; c</code>.',
    );
    expect(html).toContain('<b>A title</b>');
    expect(html).toContain(
      '• one\n• two with a <a href="https://example.org/?a=1&amp;b=2">link</a>\n  1. nested',
    );
    expect(html).toContain(
      '<pre><code class="language-ts">if (a &lt; b &amp;&amp; c &gt; d) return &quot;x&quot;;</code></pre>',
    );
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('<blockquote>quoted <i>words</i></blockquote>');
    // A link that is not http(s), mailto or tg is only its text.
    expect(html).not.toContain('javascript');
    expect(html.endsWith('click')).toBe(true);
    expect(checkTelegramHtml(html)).toBeNull();
  });

  it('splits long replies into parts that are each valid and within the limit', () => {
    const code =
      '```js\n' + Array.from({ length: 80 }, (_, i) => `let v${i} = a < b && c;`).join('\n') + '\n```';
    const bold = '**' + Array.from({ length: 120 }, (_, i) => `w${i}`).join(' ') + '**';
    const list = Array.from({ length: 40 }, (_, i) => `- item *${i}* <${i}>`).join('\n');
    const md = [code, bold, list, SAMPLE].join('\n\n');
    for (const limit of [60, 97, 200, 4096]) {
      const parts = telegramHtmlParts(md, limit);
      for (const p of parts) {
        expect(p.length).toBeLessThanOrEqual(limit);
        expect(checkTelegramHtml(p), p).toBeNull();
      }
      const shown = parts.map(telegramHtmlToPlain).join(' ');
      for (const word of ['v0', 'v79', 'w0', 'w119', 'item', '<39>', 'nested'])
        expect(shown.replace(/\s+/g, ' ')).toContain(word);
    }
    // A code block cut in two keeps its language on both sides.
    const parts = telegramHtmlParts(code, 200);
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) expect(p.startsWith('<pre><code class="language-js">')).toBe(true);
  });

  it('gives the plain text of a part for the fallback, links included', () => {
    const [part] = telegramHtmlParts('**a < b** [site](https://example.org/x?y=1&z=2)', 4096);
    expect(telegramHtmlToPlain(part!)).toBe('a < b site (https://example.org/x?y=1&z=2)');
  });

  it('the strict checker refuses what Telegram refuses', () => {
    expect(checkTelegramHtml('<b>x</i>')).toMatch(/unmatched end tag/);
    expect(checkTelegramHtml('<b>x')).toMatch(/end tag/);
    expect(checkTelegramHtml('a < b')).toMatch(/tag/);
    expect(checkTelegramHtml('a & b')).toMatch(/entity/);
    expect(checkTelegramHtml('<script>x</script>')).toMatch(/unsupported start tag/);
    expect(checkTelegramHtml('<a href="javascript:x">x</a>')).toMatch(/unsupported/);
    expect(checkTelegramHtml('<pre><b>x</b></pre>')).toMatch(/inside/);
    expect(checkTelegramHtml('<pre><code class="language-js">x</code></pre> &lt;ok&gt;')).toBeNull();
  });
});

describe('other platforms', () => {
  it('Discord keeps Markdown and never leaves a code fence open in a part', () => {
    const md =
      'intro **bold**\n\n```py\n' + Array.from({ length: 200 }, (_, i) => `x = ${i}`).join('\n') + '\n```';
    const parts = partsFor(md, { limit: 500, limitUnit: 'chars' });
    expect(parts.length).toBeGreaterThan(2);
    expect(parts[0]).toContain('**bold**');
    for (const p of parts) {
      expect(p.length).toBeLessThanOrEqual(500);
      expect((p.match(/```/g) ?? []).length % 2).toBe(0);
    }
  });

  it('Bluesky gets plain text with links spelled out (facets are made from them)', () => {
    const text = markdownToPlain('See **the docs** at [the site](https://example.org/docs) or https://x.org');
    expect(text).toBe('See the docs at the site (https://example.org/docs) or https://x.org');
    const parts = partsFor('word '.repeat(100), { limit: 300, limitUnit: 'graphemes', textFormat: 'plain' });
    expect(parts.length).toBe(2);
  });
});
