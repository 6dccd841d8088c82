/**
 * Every tool call of the Claude agent reaches gated's rules (docs/APPROVALS.md, "Agents"). The Claude Code
 * CLI runs commands it deems read-only (`echo`, `pwd`, `id; date`) without calling the SDK's permission
 * callback; the agent's PreToolUse hook, which fires for every call, asks gated first. Under
 * `deny Bash *` each of them is refused: the tool_result the real CLI sends back to the (local) Messages API
 * is the refusal, not the command's output. A call the rules allow runs once and is asked about once. In a
 * `supervised` group (the default autonomy) a read runs at once and a write waits for a person.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { toolApprovalsOf } from '../../store/tool-approvals.js';
import { until } from '../helpers/process.js';
import { useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();
const SHELL_AGENT = `GATED_CLAUDE_SHELL=1 node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`;

/** The tool_result the CLI sent back to the API for the Bash call that ran `command`. */
function toolResult(command: string): { content: string; isError: boolean } {
  const blocks = suite.api.requests.flatMap((r) =>
    r.body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])),
  ) as Array<{
    type: string;
    id?: string;
    tool_use_id?: string;
    input?: unknown;
    content?: unknown;
    is_error?: boolean;
  }>;
  const use = blocks.find(
    (b) => b.type === 'tool_use' && (b.input as { command?: string })?.command === command,
  );
  const result = blocks.find((b) => b.type === 'tool_result' && b.tool_use_id === use?.id);
  if (!use || !result) throw new Error(`no tool_result for ${command}`);
  const c = result.content;
  return { content: typeof c === 'string' ? c : JSON.stringify(c), isError: result.is_error === true };
}

test(
  "the CLI's read-only shortcuts reach gated's rules: echo, pwd and `id; date` refused under deny Bash *",
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start({ env: { GATED_AGENT_CMD: SHELL_AGENT } });
    const db = chat.gated.db;
    const rule = db
      .prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES (?, 1, 'Bash', '*', 'deny')`,
      )
      .run(chat.group).lastInsertRowid;
    for (const command of ['echo shortcut-ran', 'pwd', 'id; date']) {
      const words = `TOOL Bash {"command":"${command}"}`;
      const answer = await chat.reply(chat.send(words));
      expect(answer, command).toContain(`Tool Bash said: Refused: denied by tool rule ${rule}`);
      const result = toolResult(command);
      expect(result.content, command).toMatch(/^"?Refused: denied by tool rule/);
      expect(result.content, command).not.toContain(chat.groupDir);
      expect(result.content, command).not.toMatch(/uid=\d|shortcut-ran\\n|said: shortcut-ran/);
    }

    // Asked and approved: it runs, and gated was asked once (the hook and the callback never both ask: a
    // second question would wait for a decision that never comes).
    db.prepare(`UPDATE tool_rules SET decision = 'ask', input = 'echo *' WHERE id = ?`).run(rule);
    const words = 'TOOL Bash {"command":"echo hook-allowed"}';
    const id = chat.send(words);
    const store = toolApprovalsOf(db);
    const pending = await until(() => store.pending()[0], 60_000, 'the question');
    expect(store.decide(pending.code, true, 'test', null, Date.now())).toBeTruthy();
    expect(await chat.reply(id)).toContain('Tool Bash said: hook-allowed');
    expect(toolResult('echo hook-allowed').isError).toBe(false);
    expect(db.prepare(`SELECT COUNT(*) FROM tool_approvals`).pluck().get()).toBe(1);
  },
);

test(
  'a supervised group (the default): a read runs at once, a write waits for a person and runs once approved',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start({ env: { GATED_AGENT_CMD: SHELL_AGENT }, autonomy: 'supervised' });
    const db = chat.gated.db;
    expect(
      db.prepare(`SELECT autonomy FROM registered_groups WHERE folder = ?`).pluck().get(chat.group),
    ).toBe('supervised');
    expect(await chat.reply(chat.send('TOOL Bash {"command":"ls -a | grep -c ."}'))).toMatch(
      /^Tool Bash said: \d+/,
    );
    const id = chat.send('WRITE notes.txt hello');
    const store = toolApprovalsOf(db);
    const pending = await until(() => store.pending()[0], 60_000, 'the question about the write');
    expect(pending).toMatchObject({ tool: 'Write', rule_id: null });
    expect(existsSync(join(chat.groupDir, 'notes.txt'))).toBe(false);
    expect(store.decide(pending.code, true, 'test', null, Date.now())).toBeTruthy();
    expect(await chat.reply(id)).toContain('The file is written');
    expect(readFileSync(join(chat.groupDir, 'notes.txt'), 'utf8')).toBe('hello');
    expect(db.prepare(`SELECT COUNT(*) FROM tool_approvals`).pluck().get()).toBe(1);
  },
);
