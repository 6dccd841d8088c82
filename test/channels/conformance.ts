/**
 * The one conformance suite every channel passes (Telegram, Discord, local here; Bluesky calls it from
 * test/channels/bluesky.test.ts). Each channel's test file calls `channelConformance(name, makeHarness)`.
 *
 * A harness wraps the real channel and the real (local) platform behind it: the suite injects platform
 * events through the harness, stores them with the real insertInbound into a fresh SQLite database, and
 * delivers outbound rows with the real createDelivery, then asks the harness what the platform received.
 * Delivery waits go through a recording sleep that returns at once, so retry_after and backoff are
 * asserted as numbers instead of being slept through. Channels with drafts whose harness says what the chat
 * shows (`shown`) also run the drafts through the real createDrafts: edited in place, then taken over.
 * Every channel is held to its platform's row in core/platforms.ts (test/channels/platform-row.ts).
 */
import { describe, expect, it } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { platformRow } from '../../core/platforms.js';
import { silentLogger } from '../../core/log.js';
import type { Jid } from '../../core/types.js';
import type { Channel, InboundSink } from '../../channels/channel.js';
import { createDelivery, type Delivery } from '../../delivery/delivery.js';
import { createDrafts, type Drafts } from '../../delivery/drafts.js';
import { measure } from '../../core/text.js';
import type { Db } from '../../store/db.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { manualSleep } from '../delivery/script-channel.js';
import { until } from '../helpers/process.js';
import { cleanupAfterEach, inboundRows, recordingSink } from './support.js';
import { rowMismatches } from './platform-row.js';
import { registerExtras, type ButtonsHarness, type FilesHarness } from './conformance-extras.js';

/** A refusal the platform can be told to answer the next sends with. */
export type ConformanceFault = 'rate_limited' | 'server_error' | 'forbidden';

/** What the stored row of an injected event must say (chat_jid is the harness' jid). */
export interface ExpectedInbound {
  sender: string;
  verb: string;
  platform_msg_id: string | null;
  content: string;
}

/** One message the platform accepted from the bot. */
export interface ReceivedMessage {
  text: string;
  /** The platform id the message answers (reply target / thread parent), or null. */
  replyTo: string | null;
}

/**
 * The platform side of a channel under test. Everything is real: the harness starts the platform's local
 * server (or stream) in `makeHarness` and stops it in `close`.
 */
export interface ChannelHarness extends Partial<FilesHarness & ButtonsHarness> {
  /** The chat the suite talks in. */
  readonly jid: Jid;
  /**
   * A new, unstarted channel talking to the platform, storing its state (cursors) in `db`. Called a second
   * time with a reopened database to simulate a restart.
   */
  makeChannel(db: Db): Channel;
  /** A user writes `text` in the chat. Resolves with what the stored row must say. */
  inject(text: string): Promise<ExpectedInbound>;
  /**
   * The platform delivers the last injected event again (as after a lost confirmation). Absent only where
   * the platform has no event ids to redeliver (the local terminal).
   */
  redeliverLast?(): Promise<void>;
  /**
   * Messages the platform accepted in the chat, oldest first. May be a promise where the platform hands
   * messages on after accepting them (mail: once the SMTP server's queue has delivered them).
   */
  received(): ReceivedMessage[] | Promise<ReceivedMessage[]>;
  /**
   * The bot's messages in the chat as a user sees them now (edits applied, deleted ones gone), oldest
   * first. Present where the channel has drafts: the drafts tests run only then.
   */
  shown?(): string[];
  /** The next `n` sends are refused with `fault` (one of the capabilities' faults). */
  failNext(fault: ConformanceFault, n: number): void;
  /** The wait, in ms, that the platform's rate-limit fault announces. */
  readonly retryAfterMs: number;
  /** Stops the platform side. */
  close(): Promise<void>;
}

/** Builds a harness for one test (a fresh platform state every time). */
export type MakeHarness = () => Promise<ChannelHarness>;

/**
 * What the platform can do at all. A terminal has no event ids to redeliver and no rate limits or 5xx:
 * the tests of what a platform cannot do are not registered. Default: everything.
 */
export interface Capabilities {
  redelivery: boolean;
  faults: readonly ConformanceFault[];
  /**
   * The channel edits drafts in place and its harness says what the chat shows (`shown`): the drafts
   * tests run and fail if either is missing. False for channels without edits (Bluesky, the terminal) and
   * for the web chat, whose drafts travel over SSE and are tested in the browser (test/web/).
   */
  drafts: boolean;
  /** Files both ways: the harness must be a FilesHarness (conformance-extras.ts). Absent: false. */
  files?: boolean;
  /** Approval buttons (§18): the harness must be a ButtonsHarness (conformance-extras.ts). Absent: false. */
  buttons?: boolean;
  /**
   * Typing (§14, "where the platform has it"): true, the channel shows it and never throws from it; false,
   * the platform has none for bots and the channel must not pretend (no `typing`). Absent: not checked.
   */
  typing?: boolean;
}

const ALL: Capabilities = {
  redelivery: true,
  faults: ['rate_limited', 'server_error', 'forbidden'],
  drafts: true,
  typing: true,
};

function outRow(db: Db, id: number) {
  return db
    .prepare('SELECT delivery, delivery_attempts, delivery_error, parts_sent FROM messages WHERE id = ?')
    .get(id) as {
    delivery: string;
    delivery_attempts: number;
    delivery_error: string | null;
    parts_sent: number;
  };
}

/** A reply of about 2.5 limits made of paragraphs, so it splits into three parts. */
function longReply(channel: Channel): string {
  const paras: string[] = [];
  for (let i = 0; measure(paras.join('\n\n'), channel.limitUnit) < channel.limit * 2.5; i += 1) {
    paras.push(`Paragraph ${i}: ${'lorem ipsum dolor sit amet '.repeat(3).trim()}.`);
  }
  return paras.join('\n\n');
}

const squash = (s: string) => s.replace(/\s+/g, '');

/** Registers the conformance suite for one channel. */
export function channelConformance(name: string, makeHarness: MakeHarness, caps: Capabilities = ALL): void {
  describe(`${name} channel conformance`, () => {
    const defer = cleanupAfterEach();

    async function setup() {
      const h = await makeHarness();
      defer(() => h.close());
      const { db, reopen } = freshDb();
      const rec = recordingSink(db);
      const channel = await startChannel(h, db, rec.sink);
      return { h, db, reopen, rec, channel };
    }

    async function startChannel(h: ChannelHarness, db: Db, sink: InboundSink): Promise<Channel> {
      const channel = h.makeChannel(db);
      await channel.start(sink);
      defer(() => channel.stop());
      return channel;
    }

    function deliver(db: Db, channel: Channel, drafts?: Drafts) {
      const waits = manualSleep(true);
      const d: Delivery = createDelivery({
        db,
        channels: [channel],
        log: silentLogger(),
        pollMs: 0,
        sleep: waits.sleep,
        ...(drafts ? { drafts } : {}),
      });
      defer(() => d.stop());
      d.start();
      return { d, waits };
    }

    it('stores an inbound text as a row with the right jid, sender, verb and platform_msg_id', async () => {
      const { h, db, rec } = await setup();
      const expected = await h.inject('hello there');
      await rec.waitCalls(1);
      const rows = inboundRows(db);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ chat_jid: h.jid, ...expected });
      expect(expected.content).toBe('hello there');
    });

    if (caps.typing !== undefined) {
      it(
        caps.typing ? 'shows typing and never throws from it' : 'has no typing, as its platform',
        async () => {
          const { h, channel } = await setup();
          if (!caps.typing) return expect(channel.typing).toBeUndefined();
          expect(channel.typing).toBeTypeOf('function');
          await expect(channel.typing!(h.jid, true)).resolves.toBeUndefined();
          await expect(channel.typing!(h.jid, false)).resolves.toBeUndefined();
          await expect(channel.typing!(`${channel.platform}:0`, true)).resolves.toBeUndefined();
        },
      );
    }

    it('does what its platform row says (core/platforms.ts), no more and no less', async () => {
      const { channel } = await setup();
      const row = platformRow(channel.platform);
      expect(row, `a row for ${channel.platform} in core/platforms.ts`).toBeDefined();
      expect(rowMismatches(channel, row!)).toEqual([]);
    });

    it('stores two events with equal text as two rows', async () => {
      const { h, db, rec } = await setup();
      await h.inject('same words');
      await h.inject('same words');
      await rec.waitCalls(2);
      expect(inboundRows(db).map((r) => r.content)).toEqual(['same words', 'same words']);
    });

    if (caps.redelivery) {
      it('stores the same platform event delivered twice once', async () => {
        const { h, db, rec } = await setup();
        expect(h.redeliverLast, 'the harness must implement redeliverLast').toBeDefined();
        const expected = await h.inject('only once');
        await rec.waitCalls(1);
        await h.redeliverLast!();
        // Events are handled in order: once the next one is stored, the redelivered one was handled.
        const next = await h.inject('next');
        await rec.waitSeen((m) => m.platform_msg_id === next.platform_msg_id && m.content === next.content);
        const rows = inboundRows(db).filter((r) => r.content === 'only once');
        expect(rows).toHaveLength(1);
        expect(rows[0]).toMatchObject({ chat_jid: h.jid, ...expected });
      });
    }

    it('delivers a reply split at the platform limit, answering the inbound message', async () => {
      const { h, db, rec, channel } = await setup();
      const expected = await h.inject('please answer at length');
      await rec.waitCalls(1);
      const content = longReply(channel);
      const id = insertOutbound(db, {
        chat_jid: h.jid,
        content,
        kind: 'reply',
        reply_to: expected.platform_msg_id,
      });
      const { d } = deliver(db, channel);
      await d.idle();
      const got = await h.received();
      expect(got.length).toBe(3);
      for (const m of got) expect(measure(m.text, channel.limitUnit)).toBeLessThanOrEqual(channel.limit);
      expect(squash(got.map((m) => m.text).join(''))).toBe(squash(content));
      if (expected.platform_msg_id !== null) expect(got[0]!.replyTo).toBe(expected.platform_msg_id);
      expect(outRow(db, id)).toMatchObject({ delivery: 'sent', parts_sent: 3, delivery_attempts: 0 });
    });

    it('resumes a split reply after a restart and delivers the rest exactly once', async () => {
      const { h, db, reopen, channel } = await setup();
      const content = longReply(channel);
      const id = insertOutbound(db, { chat_jid: h.jid, content, kind: 'reply' });
      // The first process gets part 0 out, then dies before part 1 (a send that never happens).
      const crashing: Channel = {
        platform: channel.platform,
        limit: channel.limit,
        limitUnit: channel.limitUnit,
        start: () => channel.start(() => null),
        stop: () => channel.stop(),
        send: (p) =>
          p.part === 0 ? channel.send(p) : Promise.reject(new DeliveryError('transient', 'process killed')),
      };
      const first = deliver(db, crashing);
      await first.waits.waitedTimes(1);
      await first.d.stop();
      expect(outRow(db, id).parts_sent).toBe(1);
      expect(await h.received()).toHaveLength(1);

      await channel.stop();
      const db2 = reopen();
      const restarted = await startChannel(h, db2, recordingSink(db2).sink);
      const second = deliver(db2, restarted);
      await second.d.idle();
      const texts = (await h.received()).map((m) => m.text);
      expect(texts).toHaveLength(3);
      expect(new Set(texts).size).toBe(3);
      expect(squash(texts.join(''))).toBe(squash(content));
      expect(outRow(db2, id)).toMatchObject({ delivery: 'sent', parts_sent: 3 });
    });

    /** The real drafts of one channel in stream mode, with no pause between edits. */
    function streamDrafts(db: Db, channel: Channel): Drafts {
      const drafts = createDrafts({
        db,
        channels: [channel],
        log: silentLogger(),
        streamChannels: [channel.platform],
        minIntervalMs: 0,
      });
      defer(() => drafts.stop());
      return drafts;
    }

    /** Shows `texts` as drafts of one turn, one after the other, each once it is on screen. */
    async function showDrafts(h: ChannelHarness, drafts: Drafts, texts: string[]): Promise<void> {
      for (const text of texts) {
        drafts.partial({ chatJid: h.jid, runId: 1, key: { group: 'g', topic: '' }, turn: 1, text });
        await until(() => h.shown!().includes(text), 10_000, `the draft '${text}'`);
      }
    }

    const draftTest = (title: string, body: (s: FaultCtx) => Promise<void>) => {
      // Registered only for channels that claim drafts: a suite that skips says nothing.
      if (!caps.drafts) return;
      it(title, async () => {
        const s = await setup();
        expect(s.channel.drafts, 'the channel has DraftOps').toBeDefined();
        expect(s.h.shown, 'the harness says what the chat shows').toBeDefined();
        await body(s);
      });
    };

    draftTest('shows drafts as one message edited in place, which the answer becomes', async (s) => {
      const { h, db, channel } = s;
      const drafts = streamDrafts(db, channel);
      await showDrafts(h, drafts, ['Looking', 'Looking it up', 'Looking it up…']);
      expect(h.shown!()).toEqual(['Looking it up…']);
      const id = insertOutbound(db, { chat_jid: h.jid, content: 'It is 42.', kind: 'reply' });
      const { d } = deliver(db, channel, drafts);
      await d.idle();
      expect(h.shown!()).toEqual(['It is 42.']);
      expect(await h.received()).toHaveLength(1);
      expect(outRow(db, id)).toMatchObject({ delivery: 'sent', parts_sent: 1 });
      expect(db.prepare('SELECT count(*) FROM drafts').pluck().get()).toBe(0);
      // The chat went quiet (no pause between edits here): the drafts keep nothing of it.
      await until(() => drafts.kept() === 0, 5000, 'the quiet chat forgotten');
    });

    draftTest('replaces the draft by the parts of an answer too long for one message', async (s) => {
      const { h, db, channel } = s;
      const drafts = streamDrafts(db, channel);
      await showDrafts(h, drafts, ['Writing', 'Writing a lot']);
      const content = longReply(channel);
      insertOutbound(db, { chat_jid: h.jid, content, kind: 'reply' });
      const { d } = deliver(db, channel, drafts);
      await d.idle();
      const shown = h.shown!();
      expect(shown).toHaveLength(3);
      expect(squash(shown.join(''))).toBe(squash(content));
      expect(db.prepare('SELECT count(*) FROM drafts').pluck().get()).toBe(0);
    });

    const faultTest = (fault: ConformanceFault, title: string, body: (s: FaultCtx) => Promise<void>) => {
      if (caps.faults.includes(fault)) it(title, async () => body(await setup()));
    };
    type FaultCtx = Awaited<ReturnType<typeof setup>>;

    faultTest(
      'rate_limited',
      'waits retry_after on a 429, then delivers once',
      async ({ h, db, channel }) => {
        const id = insertOutbound(db, { chat_jid: h.jid, content: 'after the rate limit', kind: 'reply' });
        h.failNext('rate_limited', 1);
        const { d, waits } = deliver(db, channel);
        await d.idle();
        expect(waits.waits).toHaveLength(1);
        expect(waits.waits[0]!.ms).toBeGreaterThanOrEqual(h.retryAfterMs);
        expect(waits.waits[0]!.ms).toBeLessThan(h.retryAfterMs + 1000);
        expect((await h.received()).map((m) => m.text)).toEqual(['after the rate limit']);
        expect(outRow(db, id)).toMatchObject({ delivery: 'sent', delivery_attempts: 1 });
      },
    );

    faultTest(
      'server_error',
      'retries a 5xx with backoff, then delivers once',
      async ({ h, db, channel }) => {
        const id = insertOutbound(db, { chat_jid: h.jid, content: 'after two errors', kind: 'reply' });
        h.failNext('server_error', 2);
        const { d, waits } = deliver(db, channel);
        await d.idle();
        expect(waits.waits).toHaveLength(2);
        expect((await h.received()).map((m) => m.text)).toEqual(['after two errors']);
        expect(outRow(db, id)).toMatchObject({ delivery: 'sent', delivery_attempts: 2 });
      },
    );

    faultTest(
      'forbidden',
      'records a 403 as a permanent failure, without retrying',
      async ({ h, db, channel }) => {
        const id = insertOutbound(db, { chat_jid: h.jid, content: 'nobody will see this', kind: 'reply' });
        h.failNext('forbidden', 1);
        const { d, waits } = deliver(db, channel);
        await d.idle();
        expect(waits.waits).toHaveLength(0);
        expect(await h.received()).toEqual([]);
        const row = outRow(db, id);
        expect(row).toMatchObject({ delivery: 'failed', delivery_attempts: 1 });
        expect(row.delivery_error).toBeTruthy();
      },
    );

    registerExtras(caps, setup);
  });
}
