/**
 * The email channel against a real Dovecot (IMAP) and Postfix (SMTP) on loopback (test/infra/mail.ts): the
 * conformance suite (mail has no drafts, no edits and no rate-limit answer with a wait; temporary and
 * permanent SMTP refusals come from the real Postfix, told by its policy service), then what is particular
 * to mail. One pair of servers for the whole file; each test reads only the mail that arrived after it began.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { abortableSleep } from '../../core/backoff.js';
import { silentLogger } from '../../core/log.js';
import type { Channel } from '../../channels/channel.js';
import { EmailChannel } from '../../channels/email/index.js';
import { createDelivery } from '../../delivery/delivery.js';
import { createInbox } from '../../channels/inbox.js';
import type { Db } from '../../store/db.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { manualSleep } from '../delivery/script-channel.js';
import { BOT, startMailWorld, type MailWorld } from '../infra/mail.js';
import { channelConformance } from './conformance.js';
import { cleanupAfterEach, inboundRows, recordingSink } from './support.js';

const ALICE = 'alice@example.test';
const CAROL = 'carol@example.test';
let world: MailWorld;

beforeAll(async () => {
  world = await startMailWorld([ALICE, CAROL]);
}, 60_000);
afterAll(async () => {
  await world?.stop();
});

const channelFor = (db: Db, pollMs = 60_000) =>
  new EmailChannel({ config: world.config(), db, log: silentLogger(), pollMs });

let seq = 0;

channelConformance(
  'email',
  async () => {
    const from = await world.nextUid(ALICE);
    let last: string | undefined;
    const sources = new Map<string, string>();
    return {
      jid: `email:${ALICE}`,
      makeChannel: (db) => channelFor(db),
      async inject(text) {
        const id = `<conformance.${process.pid}.${(seq += 1)}@example.test>`;
        // No subject: the stored text is then exactly the body (a thread's first mail leads with it).
        const raw = [
          `From: Alice <${ALICE}>`,
          `To: ${BOT.address}`,
          `Message-ID: ${id}`,
          `Date: ${new Date().toUTCString()}`,
          'Content-Type: text/plain; charset=utf-8',
          '',
          text,
          '',
        ].join('\r\n');
        sources.set(id, raw);
        last = id;
        await world.send(ALICE, { envelope: { from: ALICE, to: BOT.address }, raw });
        return { sender: ALICE, verb: 'message', platform_msg_id: id, content: text };
      },
      async redeliverLast() {
        // The same mail delivered a second time (a new UID, the same Message-ID).
        await world.append(BOT.address, sources.get(last!)!);
      },
      async received() {
        await world.settled();
        return (await world.inbox(ALICE, from - 1)).map(({ mail }) => ({
          text: (mail.text ?? '').replace(/\n$/, ''),
          replyTo: mail.inReplyTo ?? null,
        }));
      },
      failNext: (fault, n) =>
        world.postfix.failNext(fault === 'forbidden' ? 'permanent' : 'temporary', n, BOT.address),
      retryAfterMs: 0,
      close: async () => undefined,
    };
  },
  { redelivery: true, faults: ['server_error', 'forbidden'], drafts: false },
);

describe('email channel', () => {
  const defer = cleanupAfterEach();

  async function setup() {
    const { db, reopen } = freshDb();
    const rec = recordingSink(db);
    const channel = channelFor(db);
    await channel.start(rec.sink);
    defer(() => channel.stop());
    return { db, reopen, rec, channel };
  }

  function deliver(db: Db, channel: Channel, groupsDir?: string) {
    const d = createDelivery({
      db,
      channels: [channel],
      ...(groupsDir ? { groupsDir } : {}),
      log: silentLogger(),
      pollMs: 0,
      sleep: manualSleep(true).sleep,
    });
    defer(() => d.stop());
    d.start();
    return d;
  }

  it('answers a mail in its thread: Re: subject, In-Reply-To, References, text and safe HTML', async () => {
    const { db, rec, channel } = await setup();
    const from = await world.nextUid(ALICE);
    const first = await world.send(ALICE, { to: BOT.address, subject: 'Lunch', text: 'Where shall we eat?' });
    await rec.waitCalls(1);
    const row = inboundRows(db)[0]!;
    expect(row).toMatchObject({
      chat_jid: `email:${ALICE}`,
      sender: ALICE,
      verb: 'message',
      platform_msg_id: first,
      content: 'Subject: Lunch\n\nWhere shall we eat?',
    });
    insertOutbound(db, {
      chat_jid: row.chat_jid,
      content: 'At **noon**, <script>alert(1)</script> [menu](javascript:alert(1))',
      kind: 'reply',
      reply_to: first,
      topic: row.topic,
    });
    await deliver(db, channel).idle();
    await world.settled();
    const [answer] = await world.inbox(ALICE, from - 1).then((m) => m.filter((x) => x.mail.inReplyTo));
    expect(answer!.mail.subject).toBe('Re: Lunch');
    expect(answer!.mail.inReplyTo).toBe(first);
    expect(answer!.mail.references).toEqual(first);
    expect(answer!.mail.headers.get('auto-submitted')).toBe('auto-replied');
    expect(answer!.mail.text).toContain('At **noon**');
    const html = String(answer!.mail.html);
    expect(html).toContain('<strong>noon</strong>');
    expect(html).not.toContain('<script');
    expect(html).not.toContain('javascript:');

    // Alice answers the answer: same thread, same topic; the quoted history is not part of the text.
    const second = await world.send(ALICE, {
      to: BOT.address,
      subject: 'Re: Lunch',
      inReplyTo: answer!.mail.messageId!,
      references: [first, answer!.mail.messageId!],
      text: 'Noon it is.\n\nOn Tue, Bot wrote:\n> At noon\n',
    });
    await rec.waitCalls(2);
    const reply = inboundRows(db)[1]!;
    expect(reply).toMatchObject({
      platform_msg_id: second,
      reply_to: answer!.mail.messageId,
      topic: row.topic,
      content: 'Noon it is.',
    });
  });

  it('saves an inbound attachment into the group folder and sends a file back as a MIME attachment', async () => {
    const { db, rec, channel } = await setup();
    const dir = tempDir();
    const bytes = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 251));
    const id = await world.send(ALICE, {
      to: BOT.address,
      subject: 'Report',
      text: 'See attached.',
      attachments: [{ filename: 'data.bin', content: bytes, contentType: 'application/octet-stream' }],
    });
    await rec.waitCalls(1);
    const msgId = db.prepare('SELECT id FROM messages WHERE platform_msg_id = ?').pluck().get(id) as number;
    // Route the row to a group by hand, as the gateway would, and let the real inbox downloader fetch it.
    db.prepare("UPDATE messages SET group_folder = 'mail', state = 'held' WHERE id = ?").run(msgId);
    const inbox = createInbox({
      db,
      channels: [channel],
      groupsDir: dir,
      maxBytes: 1 << 20,
      log: silentLogger(),
    });
    defer(() => inbox.stop());
    inbox.start();
    const saved = await until(
      () =>
        db
          .prepare("SELECT path FROM attachments WHERE message_id = ? AND state = 'saved'")
          .pluck()
          .get(msgId) as string | undefined,
      20_000,
      'the attachment saved',
    );
    expect(readFileSync(join(dir, 'mail', saved))).toEqual(bytes);

    // Outbound: a reply with a file of the group's folder.
    mkdirSync(join(dir, 'mail', 'out'), { recursive: true });
    const file = join(dir, 'mail', 'out', 'answer.txt');
    writeFileSync(file, 'forty-two\n');
    const out = insertOutbound(db, {
      chat_jid: `email:${ALICE}`,
      content: 'Here it is.',
      kind: 'reply',
      reply_to: id,
    });
    db.prepare(
      `INSERT INTO outbound_files (message_id, seq, path, abs_path, name, mime, state)
       VALUES (?, 0, 'out/answer.txt', ?, 'answer.txt', 'text/plain', 'ok')`,
    ).run(out, file);
    const from = await world.nextUid(ALICE);
    await deliver(db, channel, dir).idle();
    await world.settled();
    const got = await world.inbox(ALICE, from - 1);
    expect(got.map((g) => g.mail.subject)).toEqual(['Re: Report (1/2)', 'Re: Report (2/2)']);
    const attached = got[1]!.mail.attachments[0]!;
    expect(attached.filename).toBe('answer.txt');
    expect(attached.content.toString()).toBe('forty-two\n');
    expect(got[1]!.mail.inReplyTo).toBe(got[0]!.mail.messageId);
  });

  it('saves every attachment of a mail of 60 from the parse made when it arrived', async () => {
    const { db, rec, channel } = await setup();
    const dir = tempDir();
    const files = Array.from({ length: 60 }, (_, i) => ({
      filename: `part-${i}.bin`,
      content: Buffer.alloc(2000, i),
      contentType: 'application/octet-stream',
    }));
    const id = await world.send(ALICE, {
      to: BOT.address,
      subject: 'Many',
      text: 'sixty',
      attachments: files,
    });
    await rec.waitCalls(1);
    const msgId = db.prepare('SELECT id FROM messages WHERE platform_msg_id = ?').pluck().get(id) as number;
    db.prepare("UPDATE messages SET group_folder = 'mail', state = 'held' WHERE id = ?").run(msgId);
    const inbox = createInbox({
      db,
      channels: [channel],
      groupsDir: dir,
      maxBytes: 1 << 20,
      log: silentLogger(),
    });
    defer(() => inbox.stop());
    inbox.start();
    const saved = await until(
      () => {
        const paths = db
          .prepare("SELECT path FROM attachments WHERE message_id = ? AND state = 'saved' ORDER BY seq")
          .pluck()
          .all(msgId) as string[];
        return paths.length === 60 ? paths : undefined;
      },
      20_000,
      'the 60 attachments saved',
    );
    saved.forEach((p, i) => expect(readFileSync(join(dir, 'mail', p)), p).toEqual(files[i]!.content));
  });

  it('stops a loop with an auto-responder that marks nothing at the cap: one note, then silence', async () => {
    const { db } = freshDb();
    const rec = recordingSink(db);
    const replies: number[] = [];
    // Gated's side of the loop: every mail from the responder is answered, as an agent would.
    const sink: typeof rec.sink = (msg) => {
      const id = rec.sink(msg);
      if (id !== null && msg.sender === CAROL)
        replies.push(
          insertOutbound(db, {
            chat_jid: msg.chat_jid,
            content: `answer ${replies.length}`,
            kind: 'reply',
            reply_to: msg.platform_msg_id,
          }),
        );
      return id;
    };
    const channel = new EmailChannel({
      config: world.config(),
      db,
      log: silentLogger(),
      pollMs: 200,
      mailsPerHour: 3,
    });
    await channel.start(sink);
    defer(() => channel.stop());
    const d = deliver(db, channel);
    // The responder: answers every mail it gets from the bot, with no Auto-Submitted and no precedence.
    let seen = (await world.nextUid(CAROL)) - 1;
    let answered = 0;
    const respond = async () => {
      await world.settled();
      for (const { uid, mail } of await world.inbox(CAROL, seen)) {
        seen = uid;
        answered++;
        await world.send(CAROL, {
          to: BOT.address,
          subject: `Re: ${mail.subject ?? ''}`,
          inReplyTo: mail.messageId,
          references: [mail.messageId!],
          text: 'I am away; your mail is important to me.',
        });
      }
    };
    await world.send(CAROL, { to: BOT.address, subject: 'Hello', text: 'hi' });
    const state = (id: number) =>
      db.prepare('SELECT delivery AS state, delivery_error AS error FROM messages WHERE id = ?').get(id) as {
        state: string;
        error: string | null;
      };
    await until(
      async () => {
        // As the queue's outbound signal would, once an answer is stored.
        d.wake();
        await d.idle();
        await respond();
        return (
          replies.length >= 5 &&
          replies.slice(0, 5).every((id) => ['sent', 'failed'].includes(state(id).state))
        );
      },
      45_000,
      'five answers sent or refused',
    );
    // Three answers went out, then the note in place of the fourth, then nothing.
    const got = await world.inbox(CAROL, 0);
    const fromBot = got.filter(({ mail }) => mail.from?.value[0]?.address === BOT.address);
    expect(fromBot.slice(-4).map(({ mail }) => (mail.text ?? '').trim().slice(0, 40))).toEqual([
      'answer 0',
      'answer 1',
      'answer 2',
      'gated has sent 3 mails to this address w',
    ]);
    expect(replies.slice(0, 3).map((id) => state(id).state)).toEqual(['sent', 'sent', 'sent']);
    expect(state(replies[3]!)).toMatchObject({
      state: 'failed',
      error: `over the cap of 3 mails per hour to ${CAROL}: not sent (the correspondent was told once)`,
    });
    expect(state(replies[4]!)).toMatchObject({
      state: 'failed',
      error: `over the cap of 3 mails per hour to ${CAROL}: not sent`,
    });
    expect(answered).toBeGreaterThanOrEqual(4);
  }, 60_000);

  it('starts a session of its own for a mail that names another correspondent’s thread', async () => {
    const { rec } = await setup();
    const first = await world.send(ALICE, { to: BOT.address, subject: 'Plans', text: 'my plans' });
    await rec.waitSeen((m) => m.platform_msg_id === first);
    const alicesTopic = rec.seen.find((m) => m.platform_msg_id === first)!.topic;
    // Alice's own follow-up joins her thread.
    const again = await world.send(ALICE, {
      to: BOT.address,
      subject: 'Re: Plans',
      inReplyTo: first,
      references: [first],
      text: 'more plans',
    });
    await rec.waitSeen((m) => m.platform_msg_id === again);
    expect(rec.seen.find((m) => m.platform_msg_id === again)!.topic).toBe(alicesTopic);
    // Carol names Alice's first Message-ID: her mail is a session of its own, and so is her next one.
    const foreign = await world.send(CAROL, {
      to: BOT.address,
      subject: 'Re: Plans',
      inReplyTo: first,
      references: [first],
      text: 'resume her session, please',
    });
    await rec.waitSeen((m) => m.platform_msg_id === foreign);
    const carols = rec.seen.find((m) => m.platform_msg_id === foreign)!;
    expect(carols.topic).not.toBe(alicesTopic);
    const next = await world.send(CAROL, {
      to: BOT.address,
      subject: 'Re: Plans',
      inReplyTo: foreign,
      references: [first, foreign],
      text: 'still trying',
    });
    await rec.waitSeen((m) => m.platform_msg_id === next);
    expect(rec.seen.find((m) => m.platform_msg_id === next)!.topic).not.toBe(alicesTopic);
  });

  it('stores a mail of 10,000 parts from its headers, saying why the rest was not read', async () => {
    const { db, rec } = await setup();
    const id = `<parts.${process.pid}.${Date.now()}@example.test>`;
    const parts = Array.from(
      { length: 10_000 },
      (_, i) => `--b0\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`,
    ).join('');
    const raw = [
      `From: Alice <${ALICE}>`,
      `To: ${BOT.address}`,
      'Subject: ten thousand',
      `Message-ID: ${id}`,
      `Date: ${new Date().toUTCString()}`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed;',
      ' boundary="b0"',
      '',
      `${parts}--b0--`,
      '',
    ].join('\r\n');
    await world.send(ALICE, { envelope: { from: ALICE, to: BOT.address }, raw });
    await rec.waitCalls(1);
    const row = inboundRows(db).find((r) => r.platform_msg_id === id)!;
    expect(row.sender).toBe(ALICE);
    expect(row.content).toContain(
      '(gated did not read this mail: 10,001 MIME parts, more than the 500 gated reads. Only its headers were kept.)',
    );
    expect(row.content).toContain('ten thousand');
    expect(db.prepare('SELECT count(*) FROM attachments').pluck().get()).toBe(0);
  });

  it('stores an auto-reply and a bounce but never answers them, and refuses a reply that would loop', async () => {
    const { db, rec, channel } = await setup();
    await world.send(CAROL, {
      to: BOT.address,
      subject: 'Out of office',
      text: 'I am away until Monday.',
      headers: { 'Auto-Submitted': 'auto-replied' },
    });
    // A real bounce: the bot writes to an address Dovecot does not know; Postfix returns it.
    const lost = insertOutbound(db, {
      chat_jid: 'email:nobody@example.test',
      content: 'Hello?',
      kind: 'send',
    });
    await deliver(db, channel).idle();
    await rec.waitCalls(2);
    const rows = db
      .prepare('SELECT chat_jid, verb, state, error FROM messages WHERE is_from_me = 0 ORDER BY id')
      .all() as { chat_jid: string; verb: string; state: string; error: string }[];
    expect(rows.map((r) => [r.chat_jid, r.verb, r.state]).sort()).toEqual([
      [`email:${CAROL}`, 'auto-reply', 'dropped'],
      ['email:mailer-daemon@example.test', 'bounce', 'dropped'],
    ]);
    expect(db.prepare('SELECT delivery FROM messages WHERE id = ?').pluck().get(lost)).toBe('sent');

    // Answers to either (an agent's send, a reply to the auto-reply) are refused before SMTP.
    const auto = db
      .prepare("SELECT platform_msg_id FROM messages WHERE verb = 'auto-reply'")
      .pluck()
      .get() as string;
    const toDaemon = insertOutbound(db, {
      chat_jid: 'email:mailer-daemon@example.test',
      content: 'Thanks',
      kind: 'send',
    });
    const toAuto = insertOutbound(db, {
      chat_jid: `email:${CAROL}`,
      content: 'Enjoy',
      kind: 'reply',
      reply_to: auto,
    });
    const from = await world.nextUid(CAROL);
    await deliver(db, channel).idle();
    const outcome = db
      .prepare('SELECT id, delivery, delivery_error FROM messages WHERE id IN (?, ?) ORDER BY id')
      .all(toDaemon, toAuto) as { delivery: string; delivery_error: string }[];
    expect(outcome.map((o) => o.delivery)).toEqual(['failed', 'failed']);
    for (const o of outcome) expect(o.delivery_error).toMatch(/would loop/);
    await world.settled();
    expect(await world.inbox(CAROL, from - 1)).toEqual([]);
  });

  it('ignores its own mail', async () => {
    const { db, rec } = await setup();
    await world.send(BOT.address, { to: BOT.address, subject: 'note to self', text: 'mine' });
    await world.send(ALICE, { to: BOT.address, subject: 'after', text: 'theirs' });
    await rec.waitCalls(1);
    await world.settled();
    expect(inboundRows(db).map((r) => r.sender)).toEqual([ALICE]);
  });

  it('reconnects after the IMAP server restarts and reads what arrived while it was away', async () => {
    // The channel's waits pass through a gate: shut, the channel stays away after losing its connection
    // until the test has put mail into the restarted server, so that mail can only be read by a catch-up.
    let gate: Promise<void> = Promise.resolve();
    let open = () => {};
    const { db } = freshDb();
    const rec = recordingSink(db);
    const channel = new EmailChannel({
      config: world.config(),
      db,
      log: silentLogger(),
      pollMs: 60_000,
      sleep: (ms, signal) => gate.then(() => abortableSleep(ms, signal)),
    });
    await channel.start(rec.sink);
    defer(() => channel.stop());
    await world.send(ALICE, { to: BOT.address, subject: 'one', text: 'before' });
    await rec.waitCalls(1);
    gate = new Promise<void>((resolve) => (open = resolve));
    await world.dovecot.restart();
    // Not logged in: Postfix's SMTP processes still hold their lost connection to Dovecot's auth service.
    await world.send(ALICE, { to: BOT.address, subject: 'two', text: 'while away' }, { login: false });
    await world.settled();
    expect(rec.seen).toHaveLength(1);
    open();
    await world.send(ALICE, { to: BOT.address, subject: 'three', text: 'after' }, { login: false });
    await until(() => inboundRows(db).length >= 3, 30_000, 'three mails stored');
    const texts = inboundRows(db).map((r) => r.content.split('\n\n')[1]);
    expect(texts).toEqual(['before', 'while away', 'after']);
  }, 60_000);
});
