import type { WebClient } from '@slack/web-api';
import { escapeMrkdwn } from '../../core/markdown.js';
import type { ApprovalOps } from '../channel.js';
import { platformError, roomOf, toDeliveryError } from './send.js';

/**
 * Slack approval messages (§18, docs/CHANNELS.md "Buttons"): a section with the question and a Block Kit
 * actions block whose buttons carry their command as `value` (approve styled primary, reject danger).
 * A press arrives as a `block_actions` interaction (Socket Mode or `/hooks/slack`) and becomes a `button`
 * row (map.ts); `decided` rewrites the message without its buttons.
 */
export function slackApprovals(web: WebClient): ApprovalOps {
  return {
    // A section's text holds at most 3,000 characters (after the escaping below).
    limit: 3000,
    async ask(chatJid, text, buttons, thread) {
      const elements = buttons.map((b, i) => ({
        type: 'button' as const,
        action_id: `gated_approval_${i}`,
        text: { type: 'plain_text' as const, text: b.label.slice(0, 75) },
        value: b.command,
        ...(b.command.startsWith('/approve') ? { style: 'primary' as const } : {}),
        ...(b.command.startsWith('/reject') ? { style: 'danger' as const } : {}),
      }));
      // The question quotes the agent's input: `<!channel>`, `<!here>` or `<!subteam^…>` in it must show
      // as text, never notify a whole channel. Slack reads the top-level `text` (what notifications and
      // clients without blocks show) as mrkdwn too, so both are escaped.
      const safe = escapeMrkdwn(text);
      try {
        const res = await web.chat.postMessage({
          channel: roomOf(chatJid),
          text: safe,
          blocks: [
            { type: 'section', text: { type: 'mrkdwn', text: safe.slice(0, 3000) } },
            { type: 'actions', elements },
          ],
          ...(thread ? { thread_ts: thread } : {}),
        });
        if (!res.ts) throw new Error('chat.postMessage returned no ts');
        return res.ts;
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async decided(chatJid, platformId, text) {
      const safe = escapeMrkdwn(text);
      try {
        await web.chat.update({
          channel: roomOf(chatJid),
          ts: platformId,
          text: safe,
          blocks: [{ type: 'section', text: { type: 'mrkdwn', text: safe.slice(0, 3000) } }],
        });
      } catch (err) {
        if (platformError(err) === 'message_not_found') return;
        throw toDeliveryError(err);
      }
    },
  };
}
