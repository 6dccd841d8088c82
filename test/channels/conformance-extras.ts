/**
 * The conformance tests of what only some platforms have: files both ways, approval buttons (§18) and the
 * pacing of drafts.
 * Registered by channelConformance for the channels whose capabilities claim them; a channel that claims
 * one and lacks it (or whose harness cannot drive it) fails instead of skipping.
 */
import { expect, it } from 'vitest';
import type { Channel, DraftOps, InboundSink } from '../../channels/channel.js';
import { silentLogger } from '../../core/log.js';
import { createDrafts } from '../../delivery/drafts.js';
import type { Db } from '../../store/db.js';
import { until } from '../helpers/process.js';
import type { ExpectedInbound } from './conformance.js';
import { inboundRows, type RecordingSink } from './support.js';

/** What the platform side must offer for the files tests. */
export interface FilesHarness {
  /** A user shares a file (no text) in the chat; resolves with what the stored row must say. */
  injectFile(name: string, data: Buffer, mime: string): Promise<ExpectedInbound>;
  /** The files the bot shared in the chat, oldest first. */
  sentFiles(): Array<{ name: string; data: Buffer }>;
}

/** What the platform side must offer for the buttons tests. */
export interface ButtonsHarness {
  /** `user` presses button `index` of the bot's message `platformId`; resolves with the presser's sender id. */
  press(platformId: string, index: number, user: string): Promise<{ sender: string }>;
  /** The commands of the buttons the message shows now ([] once they are removed). */
  buttonsOf(platformId: string): string[];
  /** The message's text as shown now. */
  textOf(platformId: string): string;
}

/** One test's world, as channelConformance's setup makes it. */
export interface ExtrasCtx {
  h: { jid: string; redeliverLast?: () => Promise<void>; shown?: () => string[] } & Partial<
    FilesHarness & ButtonsHarness
  >;
  db: Db;
  rec: RecordingSink & { sink: InboundSink };
  channel: Channel;
}

/** Registers the files, buttons and draft pacing tests for the capabilities claimed. */
export function registerExtras(
  caps: { files?: boolean; buttons?: boolean; drafts?: boolean },
  setup: () => Promise<ExtrasCtx>,
) {
  if (caps.drafts) {
    it('paces the edits of a chat: drafts in between are never shown, the newest is', async () => {
      const { h, db, channel } = await setup();
      expect(channel.drafts && h.shown, 'the channel has drafts and the harness shows them').toBeTruthy();
      const ops = channel.drafts!;
      const edits: string[] = [];
      const watched: DraftOps = {
        open: (chat, text, thread, replyTo) => ops.open(chat, text, thread, replyTo),
        edit: (chat, id, text, final) => (edits.push(text), ops.edit(chat, id, text, final)),
        remove: (chat, id) => ops.remove(chat, id),
        ...(ops.finalReplaces ? { finalReplaces: true } : {}),
      };
      const drafts = createDrafts({
        db,
        channels: [Object.create(channel, { drafts: { value: watched } }) as Channel],
        log: silentLogger(),
        streamChannels: [channel.platform],
        minIntervalMs: 400,
      });
      const partial = (text: string) =>
        drafts.partial({ chatJid: h.jid, runId: 1, key: { group: 'g', topic: '' }, turn: 1, text });
      try {
        const t0 = Date.now();
        partial('step 0');
        await until(() => h.shown!().includes('step 0'), 10_000, 'the first draft');
        for (let i = 1; i <= 10; i += 1) partial(`step ${i}`);
        await until(() => h.shown!().includes('step 10'), 10_000, 'the newest draft');
        // One edit, at the chat's next slot (posting 'step 0' took the first): straight to the newest text.
        expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
        expect(edits).toEqual(['step 10']);
        expect(h.shown!()).toEqual(['step 10']);
      } finally {
        await drafts.stop();
      }
    });
  }

  if (caps.files) {
    it('takes a file both ways: a shared file fetched by its source, a reply file sent into the chat', async () => {
      const { h, rec, channel } = await setup();
      expect(h.injectFile && h.sentFiles, 'the harness shares and lists files').toBeTruthy();
      expect(channel.fetchAttachment && channel.sendFile, 'the channel has files').toBeTruthy();
      const data = Buffer.from('a,b\n1,2\n');
      const expected = await h.injectFile!('table.csv', data, 'text/csv');
      await rec.waitSeen((m) => m.platform_msg_id === expected.platform_msg_id);
      const att = rec.seen.find((m) => m.platform_msg_id === expected.platform_msg_id)!.attachments?.[0];
      expect(att).toMatchObject({ name: 'table.csv', mime: 'text/csv' });
      expect((await channel.fetchAttachment!(att!.source, 1024)).data.equals(data)).toBe(true);

      // Delivery reads the bytes from the group's folder (core/safe-file.ts) and hands them over.
      const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
      const base = { messageId: 77, chatJid: h.jid, part: 0, parts: 1, topic: '', previousPartId: null };
      await channel.sendFile!({
        ...base,
        replyTo: expected.platform_msg_id,
        path: '/groups/demo/out/plot.png',
        data: png,
        name: 'plot.png',
        mime: 'image/png',
        as: 'photo',
      });
      const sent = h.sentFiles!();
      expect(sent.map((f) => f.name)).toEqual(['plot.png']);
      expect(sent[0]!.data.equals(png)).toBe(true);
    });
  }

  if (caps.buttons) {
    it('asks an approval with buttons; a press is a button row, stored once; the decision removes them', async () => {
      const { h, db, rec, channel } = await setup();
      expect(h.press && h.buttonsOf && h.textOf, 'the harness presses and shows buttons').toBeTruthy();
      expect(channel.approvals, 'the channel has ApprovalOps').toBeDefined();
      const buttons = [
        { label: 'Approve', command: '/approve Q7X2K' },
        { label: 'Reject', command: '/reject Q7X2K' },
      ];
      const id = await channel.approvals!.ask(h.jid, 'May the agent run `make deploy`?', buttons);
      expect(h.buttonsOf!(id)).toEqual(['/approve Q7X2K', '/reject Q7X2K']);
      const { sender } = await h.press!(id, 0, 'approver-1');
      await rec.waitSeen((m) => m.verb === 'button');
      if (h.redeliverLast) {
        await h.redeliverLast();
        await h.press!(id, 1, 'approver-2');
        await rec.waitSeen((m) => m.content === '/reject Q7X2K');
      }
      const rows = inboundRows(db).filter((r) => r.verb === 'button');
      expect(rows[0]).toMatchObject({ chat_jid: h.jid, sender, content: '/approve Q7X2K' });
      expect(rows.filter((r) => r.content === '/approve Q7X2K')).toHaveLength(1);
      expect(new Set(rows.map((r) => r.platform_msg_id)).size).toBe(rows.length);
      await channel.approvals!.decided(h.jid, id, 'Approved by approver-1');
      expect(h.buttonsOf!(id)).toEqual([]);
      expect(h.textOf!(id)).toBe('Approved by approver-1');
    });
  }
}
