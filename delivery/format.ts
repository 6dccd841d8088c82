import { markdownToMrkdwn, markdownToPlain } from '../core/markdown.js';
import { telegramHtmlParts } from '../core/telegram-html.js';
import { splitText } from '../core/text.js';
import type { Channel } from '../channels/channel.js';

/**
 * The parts of a reply as its channel reads them: the agent's Markdown converted to the channel's dialect,
 * then split at the platform's limit so that each part stands alone (no HTML tag and no code fence left
 * open). Pure and deterministic: delivery resumes a split reply by part index.
 */
export function partsFor(
  markdown: string,
  channel: Pick<Channel, 'limit' | 'limitUnit' | 'textFormat'>,
): string[] {
  switch (channel.textFormat ?? 'markdown') {
    case 'telegram-html':
      return telegramHtmlParts(markdown, channel.limit);
    case 'slack-mrkdwn':
      return splitText(markdownToMrkdwn(markdown), channel.limit, channel.limitUnit);
    case 'plain':
      return splitText(markdownToPlain(markdown), channel.limit, channel.limitUnit);
    default:
      return splitText(markdown, channel.limit, channel.limitUnit);
  }
}
