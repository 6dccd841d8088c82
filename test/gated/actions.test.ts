/**
 * Agents' actions end to end: the whole gateway (startGated, process runtime, the example agent, which asks
 * for an action when a message starts with `!send`, `!delegate`, …), real telegraf and discord.js against
 * the local Bot API and Discord servers.
 */
import type { Chat, User } from 'telegraf/types';
import { describe, expect, it } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { startE2eGated } from '../channels/e2e.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

const team: Chat.SupergroupChat = { id: -1001111111111, type: 'supergroup', title: 'Team' };
const elsewhere: Chat.SupergroupChat = { id: -1002222222222, type: 'supergroup', title: 'Elsewhere' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };
const dcUser = { id: '700000000000000042', username: 'ada', global_name: 'Ada' };

let gated: Gated | undefined;
let tg: TelegramApiServer | undefined;
let dc: DiscordApiServer | undefined;

async function start(env: Record<string, string> = {}) {
  tg = closedAfterGateds(await TelegramApiServer.start());
  dc = closedAfterGateds(await DiscordApiServer.start());
  gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: tg.token,
      TELEGRAM_API_ROOT: tg.url,
      DISCORD_BOT_TOKEN: dc.token,
      DISCORD_API_ROOT: dc.apiRoot,
      ...env,
    },
    {
      groups: [
        ['team', 'Team'],
        ['team/discord', 'Team on Discord'],
        ['team/research', 'Research'],
        ['team/research/deep', 'Deep'],
        ['team/research/deep/deeper', 'Deeper'],
        ['other', 'Other'],
      ],
      routes: [
        [0, `room=${team.id}`, 'team'],
        [1, `room=${elsewhere.id}`, 'other'],
        [2, 'platform=discord', 'team/discord'],
      ],
    },
  );
  return gated;
}

/** The outbound rows of a chat, oldest first. */
const said = (g: Gated, chat: string) =>
  g.db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
    .pluck()
    .all(chat) as string[];

/** Waits for an outbound row of `chat` containing `text`. */
const saidSoon = (g: Gated, chat: string, text: string) =>
  until(() => said(g, chat).find((c) => c.includes(text)), 15_000, `'${text}' in ${chat}`);

describe('actions end to end', () => {
  it('send: an agent of the Telegram chat posts to a Discord channel routed below its group', async () => {
    const g = await start();
    const channel = dc!.textChannelId;
    tg!.message({ chat: team, from: ada, text: `!send discord:${channel} hello from telegram` });
    const [posted] = await dc!.waitForPosted(1);
    expect(posted).toMatchObject({ channel_id: channel, content: 'hello from telegram' });
    await tg!.waitForSent(1);
    expect(tg!.sent[0]!.text).toBe(`echo: !send discord:${channel} hello from telegram`);
    expect(g.db.prepare(`SELECT type, status, chat_jid FROM actions`).all()).toEqual([
      { type: 'send', status: 'applied', chat_jid: `telegram:${team.id}` },
    ]);
  });

  it('react on Telegram and on Discord: the emoji lands on the message the turn answers', async () => {
    await start();
    const msg = tg!.message({ chat: team, from: ada, text: '!react 👍' });
    await until(() => tg!.reactions.length > 0, 15_000, 'a telegram reaction');
    expect(tg!.reactions).toEqual([{ chatId: team.id, messageId: msg.message_id, emoji: '👍' }]);

    const posted = dc!.push({ channelId: dc!.textChannelId, author: dcUser, content: '!react 🎉' });
    await until(() => dc!.reactions.length > 0, 15_000, 'a discord reaction');
    expect(dc!.reactions).toEqual([{ channelId: dc!.textChannelId, messageId: posted.id, emoji: '🎉' }]);
  });

  it('delegate: the child answers and its answer comes back to the parent session, which answers its chat', async () => {
    const g = await start();
    g.gateway.sink({ chat_jid: 'web:team', sender: 'me', content: '!delegate research find the facts' });
    // team/research got "find the facts" and echoed it; the echo came back to team as verb delegation.
    await saidSoon(g, 'web:team', 'echo: echo: find the facts');
    const d = g.db
      .prepare(`SELECT kind, from_group, from_chat, to_group, depth, answers FROM delegations`)
      .get();
    expect(d).toEqual({
      kind: 'delegate',
      from_group: 'team',
      from_chat: 'web:team',
      to_group: 'team/research',
      depth: 1,
      answers: 1,
    });
    const rows = g.db
      .prepare(`SELECT chat_jid, verb, group_folder, state FROM messages WHERE is_from_me = 0 ORDER BY id`)
      .all();
    expect(rows).toEqual([
      { chat_jid: 'web:team', verb: 'message', group_folder: 'team', state: 'done' },
      { chat_jid: 'delegation:1', verb: 'delegate', group_folder: 'team/research', state: 'done' },
      { chat_jid: 'web:team', verb: 'delegation', group_folder: 'team', state: 'done' },
    ]);
    // Nothing was sent to a platform for the delegation chat.
    expect(said(g, 'delegation:1')).toEqual([]);
  });

  it('escalate: the nearest registered group above answers, and the answer returns below', async () => {
    const g = await start();
    g.gateway.sink({ chat_jid: 'web:team/research', sender: 'me', content: '!escalate need a decision' });
    await saidSoon(g, 'web:team/research', 'echo: echo: need a decision');
    expect(g.db.prepare(`SELECT kind, to_group FROM delegations`).get()).toEqual({
      kind: 'escalate',
      to_group: 'team',
    });
  });

  it('refusals: each is logged, counted, and one system note reaches the session in its next line', async () => {
    const g = await start({ GATED_MAX_DELEGATION_DEPTH: '2' });
    const refusals: Array<[chat: string, ask: string, note: string]> = [
      [
        'web:team',
        `!send telegram:${elsewhere.id} sneaky`,
        `chat 'telegram:${elsewhere.id}' does not reach 'team'`,
      ],
      ['web:team/research', '!delegate other go', "group 'other' is not below 'team/research'"],
      [
        'web:other',
        '!action {"type":"send","text":"to nowhere"}',
        'malformed: "chat_jid" must be a chat JID',
      ],
    ];
    for (const [chat, ask] of refusals) g.gateway.sink({ chat_jid: chat, sender: 'me', content: ask });
    for (const [chat, ask] of refusals) await saidSoon(g, chat, `echo: ${ask}`);
    for (const [chat, , note] of refusals) {
      g.gateway.sink({ chat_jid: chat, sender: 'me', content: 'what happened?' });
      await saidSoon(g, chat, 'echo: what happened?');
      const text = said(g, chat).join('\n');
      expect(text).toContain(`system: Your `);
      expect(text).toContain(note);
      // One note, in one line: asking again does not repeat it.
      g.gateway.sink({ chat_jid: chat, sender: 'me', content: 'and now?' });
      await saidSoon(g, chat, 'echo: and now?');
      expect(said(g, chat).filter((c) => c.includes(note))).toHaveLength(1);
    }
    // A chain deeper than 2: team → research → deep → (deeper) is refused at the third hop.
    g.gateway.sink({
      chat_jid: 'web:team',
      sender: 'me',
      content: '!delegate research !delegate deep !delegate deeper hi',
    });
    await saidSoon(g, 'web:team', 'echo: echo: echo: !delegate deeper hi');
    expect(g.db.prepare(`SELECT to_group, depth FROM delegations ORDER BY id`).all()).toEqual([
      { to_group: 'team/research', depth: 1 },
      { to_group: 'team/research/deep', depth: 2 },
    ]);
    g.gateway.sink({ chat_jid: 'web:team/research/deep', sender: 'me', content: 'and?' });
    await saidSoon(
      g,
      'web:team/research/deep',
      'system: Your delegate action was not applied: the delegation chain would be 3 deep; at most 2.',
    );
    const refused = g.db
      .prepare(`SELECT type, reason FROM actions WHERE status = 'refused' ORDER BY id`)
      .all();
    expect(refused).toHaveLength(4);
    const metrics = await g.metrics.text();
    expect(metrics).toMatch(/gated_actions_total\{type="send",outcome="refused"\} 2/);
    expect(metrics).toMatch(/gated_actions_total\{type="delegate",outcome="refused"\} 2/);
  });
});
