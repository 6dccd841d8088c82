/**
 * Tool approvals with the Claude agent (docs/APPROVALS.md): the scripted model (local Messages API) makes a
 * Bash `tool_use`; the agent's canUseTool asks gated; a rule sends it to `ask`; the question reaches a
 * Telegram group (telegraf against the local Bot API) with an inline keyboard; a member who is not an
 * approver presses and is refused; the owner presses Approve (the command runs once) or Reject after typing a
 * note (the model receives the note as the tool's result). The message is edited to say who decided.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import type { Chat, User } from 'telegraf/types';
import { upsertMember } from '../../store/access.js';
import { until } from '../helpers/process.js';
import { requestFor, useClaudeSuite } from './claude-support.js';

const group: Chat.GroupChat = { id: -9001, type: 'group', title: 'ops' };
const owner: User = { id: 7001, is_bot: false, first_name: 'Olga' };
const bob: User = { id: 7002, is_bot: false, first_name: 'Bob' };

const suite = useClaudeSuite({ telegram: [] });

test(
  'a Bash call sent to ask: refused for a member, approved by the owner with the Telegram button, rejected with a note the model reads',
  { timeout: 120_000 },
  async () => {
    const { api, tg } = suite;
    const chat = await suite.startTelegram({
      GATED_STREAM_CHANNELS: 'none',
      GATED_AGENT_CMD: `GATED_CLAUDE_SHELL=1 IS_SANDBOX=1 node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`,
    });
    const db = chat.gated.db;
    upsertMember(db, chat.group, 'telegram:7001', 'owner');
    upsertMember(db, chat.group, 'telegram:7002', 'member');
    db.prepare(
      `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES (?, 1, 'Bash', 'echo *', 'ask')`,
    ).run(chat.group);
    const ranFile = join(chat.groupDir, 'ran.txt');
    // The messages that came with buttons (the edit that says who decided removes them).
    const withButtons: number[] = [];
    const asked = async (n: number) => {
      const seen = () => {
        for (const m of tg.sent)
          if (m.buttons && !withButtons.includes(m.message_id)) withButtons.push(m.message_id);
        return withButtons.length >= n;
      };
      await until(seen, 60_000, `approval message ${n}`);
      return tg.sent.find((m) => m.message_id === withButtons[n - 1])!;
    };

    // 1. Approved by the owner's button; a member's press is refused first.
    tg.message({
      chat: group,
      from: bob,
      text: 'TOOL Bash {"command":"echo approved >> ran.txt","description":"note it down"}',
    });
    const q1 = await asked(1);
    // The real input first, in a code block; the agent's words after it, marked, without "Bash: Bash:".
    expect(q1.text).toContain('The agent wants to run Bash with this input, exactly:');
    expect(q1.text).toContain('<pre><code>echo approved &gt;&gt; ran.txt</code></pre>');
    expect(q1.text).toContain("The agent's own summary (not checked): <code>note it down</code>");
    expect(q1.text.indexOf('ran.txt')).toBeLessThan(q1.text.indexOf('note it down'));
    expect(q1.buttons!.flat().map((b) => b.text)).toEqual(['Approve', 'Reject']);
    tg.press(group.id, q1.message_id, bob, 'Approve');
    await until(() => tg.sent.some((m) => m.text.startsWith('you may not approve')), 20_000, 'the refusal');
    expect(existsSync(ranFile)).toBe(false);
    tg.press(group.id, q1.message_id, owner, 'Approve');
    await until(
      () => tg.sent.some((m) => m.text.includes('Tool Bash said')),
      60_000,
      'the answer after approval',
    );
    expect(readFileSync(ranFile, 'utf8')).toBe('approved\n');
    await until(() => tg.edits.some((e) => e.message_id === q1.message_id), 10_000, 'the edit');
    expect(tg.edits.find((e) => e.message_id === q1.message_id)!.text).toContain('approved by telegram:7001');
    expect(tg.sent.find((m) => m.message_id === q1.message_id)!.buttons).toBeUndefined();
    expect(tg.count('answerCallbackQuery')).toBe(2);

    // 2. Rejected with a note (typed, since a button carries no note): the model reads it.
    tg.message({ chat: group, from: bob, text: 'TOOL Bash {"command":"echo rejected >> ran.txt"}' });
    const q2 = await asked(2);
    const code = /\/approve ([A-Z0-9]{5})/.exec(q2.text)![1]!;
    tg.message({ chat: group, from: owner, text: `/reject ${code} not during the freeze` });
    await until(
      () => tg.sent.filter((m) => m.text.includes('Tool Bash said')).length >= 2,
      60_000,
      'the answer',
    );
    const answer = tg.sent.filter((m) => m.text.includes('Tool Bash said')).at(-1)!.text;
    expect(answer).toContain('not during the freeze');
    const req = requestFor(api, 'TOOL Bash {"command":"echo rejected');
    expect(JSON.stringify(req.body.messages)).toContain('not during the freeze');
    expect(readFileSync(ranFile, 'utf8')).toBe('approved\n');
    const rows = db.prepare('SELECT state, decided_by, note FROM tool_approvals ORDER BY id').all();
    expect(rows).toEqual([
      { state: 'approved', decided_by: 'telegram:7001', note: null },
      { state: 'rejected', decided_by: 'telegram:7001', note: 'not during the freeze' },
    ]);
  },
);
