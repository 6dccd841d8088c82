/**
 * The web channel through the shared channel conformance suite. Its platform is the browser tab: the
 * harness posts the way the chat's POST handler does (WebChannel.post, with the visitor id gated issued and
 * the tab's message ids) and follows the chat the way an SSE stream does (WebChannel.subscribe). The HTTP
 * and SSE transport around it is tested in test/http/chat.test.ts, and the real page in page.test.ts and
 * browser.test.ts.
 */
import { WebChannel, type ChatLine, type WebPost } from '../../channels/web/index.js';
import type { Db } from '../../store/db.js';
import { channelConformance } from '../channels/conformance.js';

channelConformance(
  'web',
  async () => {
    const received: ChatLine[] = [];
    const unsubscribe: Array<() => void> = [];
    let last: WebPost | undefined;
    let n = 0;
    let channel: WebChannel | undefined;
    return {
      jid: 'web:demo',
      makeChannel(db: Db) {
        channel = new WebChannel(db);
        // A tab that stays open across a restart of gated follows the new channel from then on.
        unsubscribe.push(
          channel.subscribe('web:demo', '', (ev) => {
            if (ev.type === 'message' && ev.line.role !== 'user') received.push(ev.line);
          }),
        );
        return channel;
      },
      async inject(text) {
        n += 1;
        last = { folder: 'demo', topic: '', content: text, visitor: 'tab', clientMsgId: `m${n}` };
        channel!.post(last);
        return { sender: 'tab', verb: 'message', platform_msg_id: `tab-m${n}`, content: text };
      },
      async redeliverLast() {
        // A POST retried after a lost answer: same visitor and message id.
        channel!.post(last!);
      },
      received: () => received.map((l) => ({ text: l.content, replyTo: l.reply_to })),
      failNext() {
        throw new Error('a browser tab never refuses a line');
      },
      retryAfterMs: 0,
      async close() {
        for (const u of unsubscribe) u();
      },
    };
  },
  // Pushing to a tab cannot be refused or rate limited; a tab that is away replays from the table.
  { redelivery: true, faults: [], drafts: false },
);
