/**
 * Drafts cut anywhere (core/draft-markdown.ts): every prefix of a Markdown answer, closed and formatted as
 * the answer will be, is valid Telegram HTML by the strict checker and shows no raw markup.
 */
import { describe, expect, it } from 'vitest';
import { draftMarkdown, interruptedText } from '../../core/draft-markdown.js';
import { markdownToPlain } from '../../core/markdown.js';
import { telegramHtmlParts } from '../../core/telegram-html.js';
import { MARKDOWN_SAMPLE } from '../infra/messages-api.js';
import { checkTelegramHtml } from '../infra/telegram-html.js';

const prefixes = (s: string) => Array.from({ length: s.length }, (_, i) => s.slice(0, i + 1));

describe('draftMarkdown', () => {
  it('every prefix of a Markdown answer is valid Telegram HTML with no raw ** ## or fence', () => {
    let checked = 0;
    for (const prefix of prefixes(MARKDOWN_SAMPLE)) {
      const html = telegramHtmlParts(draftMarkdown(prefix), 4096)[0] ?? '';
      expect(checkTelegramHtml(html), prefix).toBeNull();
      expect(html, prefix).not.toMatch(/\*\*|^#|```/m);
      checked++;
    }
    expect(checked).toBe(MARKDOWN_SAMPLE.length);
  });

  it('never shows a table head as pipes before its delimiter row', () => {
    for (const prefix of prefixes(MARKDOWN_SAMPLE)) {
      const plain = markdownToPlain(draftMarkdown(prefix));
      // A table is shown ruled (`--+--`) once it is one; bare `| name |` never.
      expect(plain, prefix).not.toMatch(/^\| name/m);
    }
  });

  it('closes what is open and leaves whole Markdown alone', () => {
    expect(draftMarkdown('Some **bold wo')).toBe('Some **bold wo**');
    expect(draftMarkdown('Some **bold words*')).toBe('Some **bold words**');
    expect(draftMarkdown('Some **')).toBe('Some');
    expect(draftMarkdown('a `co')).toBe('a `co`');
    expect(draftMarkdown('```js\nconst x')).toBe('```js\nconst x\n```');
    expect(draftMarkdown('an *ital')).toBe('an *ital*');
    expect(draftMarkdown('* one\n* two')).toBe('* one\n* two');
    expect(draftMarkdown('text\n\n| a | b |')).toBe('text');
    expect(draftMarkdown('## ')).toBe('');
    expect(draftMarkdown(MARKDOWN_SAMPLE)).toBe(MARKDOWN_SAMPLE);
  });

  it('an interrupted text keeps all it had, closes an open fence, and ends with the mark', () => {
    expect(interruptedText('line 0001 of the lo')).toBe('line 0001 of the lo\n\n…(interrupted)');
    expect(interruptedText('```js\nconst x')).toBe('```js\nconst x\n```\n\n…(interrupted)');
    expect(interruptedText('```\na\n```\nafter  ')).toBe('```\na\n```\nafter\n\n…(interrupted)');
    // A table head with no delimiter row yet is kept: the text is stored, not a draft.
    expect(interruptedText('text\n\n| a | b |')).toBe('text\n\n| a | b |\n\n…(interrupted)');
  });
});
