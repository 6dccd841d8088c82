/**
 * Tool approvals on Discord (docs/APPROVALS.md, docs/CHANNELS.md "Buttons"): the whole gateway with the
 * example agent's `!tool` mode, real discord.js against the local Discord server. The question is a message
 * with button components; a press is an INTERACTION_CREATE that the channel stores as a `button` row from
 * the presser and answers with a deferred update; a member who is not an approver is refused; the owner's
 * press (replayed by the gateway once more) is stored once and approves; the message is then edited to say
 * who decided, without its buttons.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { groupDirOf } from '../../core/group-dir.js';
import { upsertMember } from '../../store/access.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { startE2eGated } from './e2e.js';

const olga = { id: '700000000000000061', username: 'olga', global_name: 'Olga' };
const bob = { id: '700000000000000062', username: 'bob', global_name: 'Bob' };

test('a Discord approval: buttons, a member refused, the owner approves once, the message says who decided', async () => {
  const dc = closedAfterGateds(await DiscordApiServer.start());
  const g = await startE2eGated(
    { DISCORD_BOT_TOKEN: dc.token, DISCORD_API_ROOT: dc.apiRoot, GATED_STREAM_CHANNELS: 'none' },
    { groups: [['dc/ops', 'Ops']], routes: [[10, 'platform=discord verb=mention', 'dc/ops']] },
  );
  upsertMember(g.db, 'dc/ops', `discord:${olga.id}`, 'owner');
  upsertMember(g.db, 'dc/ops', `discord:${bob.id}`, 'member');
  g.db
    .prepare(`INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('dc/ops', 1, 'Bash', 'ask')`)
    .run();
  const posted = (text: string) => dc.posted.filter((p) => p.content.includes(text));
  const runsLog = join(groupDirOf(g.config.groupsDir, 'dc/ops'), '.tool-runs.log');

  dc.push({
    channelId: dc.textChannelId,
    author: bob,
    content: `<@${dc.bot.id}> !tool Bash make deploy`,
    mentions: [dc.bot],
  });
  await until(() => posted('The agent wants to run Bash').length === 1, 20_000, 'the question');
  const q = posted('The agent wants to run Bash')[0]!;
  const code = /\/approve ([A-Z0-9]{5})/.exec(q.content)![1]!;
  expect(q.buttons).toEqual([
    { label: 'Approve', custom_id: `/approve ${code}`, style: 3 },
    { label: 'Reject', custom_id: `/reject ${code}`, style: 4 },
  ]);

  // A member who is not an approver presses: acknowledged, stored, refused by the command layer.
  const refused = dc.press(dc.textChannelId, q.id, bob, 'Approve');
  await until(() => posted('you may not approve').length === 1, 20_000, 'the refusal');
  // The acknowledgement travels on its own (discord.js's REST client): wait for it, then check its type.
  await until(() => refused.answeredWith !== undefined, 10_000, 'the press acknowledged');
  expect(refused.answeredWith).toBe(6);
  expect(existsSync(runsLog)).toBe(false);
  expect(dc.buttonsOn(q.id).map((b) => b.label)).toEqual(['Approve', 'Reject']);

  // The owner presses; the gateway replays the same event, which is stored once.
  const approved = dc.press(dc.textChannelId, q.id, olga, 'Approve');
  dc.replayPress(approved);
  await until(() => posted('tool Bash ran:').length === 1, 30_000, 'the answer after approval');
  expect(readFileSync(runsLog, 'utf8').trim().split('\n')).toEqual(['Bash {"command":"make deploy"}']);
  await until(() => dc.edits.some((e) => e.messageId === q.id), 10_000, 'the edit');
  const edit = dc.edits.find((e) => e.messageId === q.id)!;
  // Edited in place: the question as it was asked, its commands replaced by how it ended.
  expect(edit.content).toContain('```\nmake deploy\n```');
  expect(edit.content).toContain(`**Bash (${code}): approved by discord:${olga.id}**`);
  expect(edit.content).not.toContain('/approve');
  expect(edit.buttons).toEqual([]);
  expect(dc.buttonsOn(q.id)).toEqual([]);
  await until(() => approved.answeredWith !== undefined, 10_000, 'the press acknowledged');
  expect(approved.answeredWith).toBe(6);
  // The replayed event was acknowledged again and refused as Discord does: one answer per interaction.
  await until(() => approved.callbacks === 2, 10_000, 'the replay answered');

  const presses = g.db
    .prepare(`SELECT sender, content, platform_msg_id, state FROM messages WHERE verb = 'button' ORDER BY id`)
    .all();
  expect(presses).toEqual([
    { sender: bob.id, content: `/approve ${code}`, platform_msg_id: `ix:${refused.id}`, state: 'command' },
    { sender: olga.id, content: `/approve ${code}`, platform_msg_id: `ix:${approved.id}`, state: 'command' },
  ]);
  const row = g.db.prepare('SELECT state, decided_by, platform_id FROM tool_approvals').get();
  expect(row).toEqual({ state: 'approved', decided_by: `discord:${olga.id}`, platform_id: q.id });
  expect(posted('The agent wants to run Bash')).toHaveLength(1);
}, 60_000);
