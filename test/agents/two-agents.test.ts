/**
 * Two groups in one gated, each with its own agent and model: the Claude agent against the local Messages
 * API and the Codex agent (agents/codex, the Codex CLI through @openai/codex-sdk) against the local
 * Responses API, both on the process runtime. The Codex group's key and base URL are its own secrets
 * (`<folder>:NAME=VAR`), and the CLI is kept off every other host (no websockets, no other requests).
 */
import { afterEach, beforeEach, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { until } from '../helpers/process.js';
import { MessagesApiServer } from '../infra/messages-api.js';
import { ResponsesApiServer } from '../infra/responses-api.js';
import { requestFor, startClaudeChat, type ClaudeChat } from './claude-support.js';

let api: MessagesApiServer;
let openai: ResponsesApiServer;
let chat: ClaudeChat | undefined;

beforeEach(async () => {
  api = await MessagesApiServer.start();
  openai = await ResponsesApiServer.start();
});

afterEach(async () => {
  await chat?.gated.close(5000);
  chat = undefined;
  await api.close();
  await openai.close();
});

const OPENAI_KEY = 'sk-openai-test-only-for-codex';

test(
  'a Claude group, a Codex group and an agent profile row answer in one instance, each with its model',
  { timeout: 180_000 },
  async () => {
    const c = (chat = await startClaudeChat(api, {
      children: ['cx', 'plain'],
      env: {
        GATED_AGENT_SECRETS:
          'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL,CLAUDE_CODE_MAX_RETRIES,' +
          'claude/cx:OPENAI_API_KEY=CX_OPENAI_KEY,claude/cx:OPENAI_BASE_URL=CX_OPENAI_URL',
        CX_OPENAI_KEY: OPENAI_KEY,
        CX_OPENAI_URL: openai.url,
        GATED_CLAUDE_MODEL: 'claude-default-model-9',
      },
    }));
    c.gated.db
      .prepare(
        `UPDATE registered_groups SET agent = 'codex', model = 'gpt-codex-test-1' WHERE folder = 'claude/cx'`,
      )
      .run();
    // A third agent without code: a profile row naming a command (the example agent).
    c.gated.db
      .prepare(`INSERT INTO agent_profiles (name, command) VALUES ('plain', ?)`)
      .run(`node '${packageFile('agents', 'example', 'agent.mjs')}'`);
    c.gated.db.prepare(`UPDATE registered_groups SET agent = 'plain' WHERE folder = 'claude/plain'`).run();
    const reply = (id: number) =>
      until(
        () =>
          c.gated.db
            .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
            .pluck()
            .get(id) as string | undefined,
        120_000,
        `the reply to ${id}`,
      );
    const toClaude = c.send('hello claude group');
    const toCodex = c.gated.gateway.sink({
      chat_jid: 'web:claude/cx',
      sender: 'bob',
      sender_name: 'Bob',
      content: 'hello codex group',
    })!;
    const toPlain = c.gated.gateway.sink({
      chat_jid: 'web:claude/plain',
      sender: 'bob',
      sender_name: 'Bob',
      content: 'hello plain group',
    })!;
    expect(await reply(toClaude)).toBe('echo: hello claude group');
    expect(await reply(toPlain)).toBe('echo: hello plain group');
    expect(await reply(toCodex)).toBe('codex echo: hello codex group');

    // Each agent got its group's model: the Claude default from GATED_CLAUDE_MODEL, Codex its own column.
    expect(requestFor(api, 'hello claude group').body.model).toBe('claude-default-model-9');
    const codexReq = openai.requestFor('hello codex group');
    expect(codexReq?.body.model).toBe('gpt-codex-test-1');
    expect(codexReq?.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(openai.websocketAttempts).toBe(0);
    // The OpenAI key is the Codex group's alone: the Claude agent's API never saw it.
    expect(JSON.stringify(api.requests.map((r) => r.headers))).not.toContain(OPENAI_KEY);

    // The Codex run reported its usage and thread; a second message resumes the same thread.
    const usage = c.gated.db
      .prepare(
        `SELECT input_tokens, output_tokens FROM session_log WHERE group_folder = 'claude/cx' ORDER BY id LIMIT 1`,
      )
      .get() as { input_tokens: number; output_tokens: number };
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeGreaterThan(0);
    const thread = c.gated.db
      .prepare(`SELECT session_id FROM sessions WHERE group_folder = 'claude/cx'`)
      .pluck()
      .get() as string;
    expect(thread).toMatch(/^[0-9a-f-]{36}$/);
    const again = c.gated.gateway.sink({
      chat_jid: 'web:claude/cx',
      sender: 'bob',
      sender_name: 'Bob',
      content: 'do you remember',
    })!;
    expect(await reply(again)).toBe('codex echo: do you remember');
    const resumed = openai.requestFor('do you remember')!;
    expect(JSON.stringify(resumed.body.input)).toContain('hello codex group');
  },
);

test(
  '/interrupt stops a Codex turn in progress; the text becomes the next turn',
  { timeout: 180_000 },
  async () => {
    const c = (chat = await startClaudeChat(api, {
      children: ['cx'],
      env: {
        GATED_AGENT_SECRETS: 'claude/cx:OPENAI_API_KEY=CX_OPENAI_KEY,claude/cx:OPENAI_BASE_URL=CX_OPENAI_URL',
        CX_OPENAI_KEY: OPENAI_KEY,
        CX_OPENAI_URL: openai.url,
      },
    }));
    c.gated.db.prepare(`UPDATE registered_groups SET agent = 'codex' WHERE folder = 'claude/cx'`).run();
    const sink = (content: string) =>
      c.gated.gateway.sink({ chat_jid: 'web:claude/cx', sender: 'bob', sender_name: 'Bob', content })!;
    const replyTo = (id: number) =>
      c.gated.db
        .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
        .pluck()
        .get(id) as string | undefined;
    const slow = sink('SLOW 60');
    await until(() => openai.requestFor('SLOW 60'), 60_000, 'the slow turn to reach the API');
    const started = Date.now();
    const next = sink('/interrupt stop now');
    expect(await until(() => replyTo(next), 60_000, 'the reply to the interrupting message')).toBe(
      'codex echo: stop now',
    );
    // Far sooner than the 60 s the slow answer would take; the slow message ended as answered.
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(c.gated.db.prepare(`SELECT state FROM messages WHERE id = ?`).pluck().get(slow)).toBe('done');
  },
);

test(
  "two Codex groups at once: a run's start leaves the other run's Codex home alone, and that thread resumes",
  { timeout: 180_000 },
  async () => {
    // Under the process runtime every run has a PID namespace of its own: the second run cannot see the
    // first one's pid, and must still not take its home (with its thread) for one a killed run left.
    const c = (chat = await startClaudeChat(api, {
      children: ['cx', 'cy'],
      env: {
        GATED_AGENT_SECRETS:
          'claude/cx:OPENAI_API_KEY=CX_OPENAI_KEY,claude/cx:OPENAI_BASE_URL=CX_OPENAI_URL,' +
          'claude/cy:OPENAI_API_KEY=CX_OPENAI_KEY,claude/cy:OPENAI_BASE_URL=CX_OPENAI_URL',
        CX_OPENAI_KEY: OPENAI_KEY,
        CX_OPENAI_URL: openai.url,
      },
    }));
    c.gated.db
      .prepare(`UPDATE registered_groups SET agent = 'codex' WHERE folder IN ('claude/cx', 'claude/cy')`)
      .run();
    const sink = (group: string, content: string) =>
      c.gated.gateway.sink({ chat_jid: `web:claude/${group}`, sender: 'bob', sender_name: 'Bob', content })!;
    const replyTo = (id: number) =>
      until(
        () =>
          c.gated.db
            .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
            .pluck()
            .get(id) as string | undefined,
        120_000,
        `the reply to ${id}`,
      );
    const slow = sink('cx', 'SLOW 3');
    await until(() => openai.requestFor('SLOW 3'), 60_000, 'the slow turn to reach the API');
    // The other group's run starts (and sweeps the temp folder) while the first one's turn streams.
    expect(await replyTo(sink('cy', 'hello from cy'))).toBe('codex echo: hello from cy');
    expect(await replyTo(slow)).toContain('1');
    const again = sink('cx', 'still there');
    expect(await replyTo(again)).toBe('codex echo: still there');
    // The same thread: the model was given the slow turn again as history.
    expect(JSON.stringify(openai.requestFor('still there')!.body.input)).toContain('SLOW 3');
  },
);
