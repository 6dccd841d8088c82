/**
 * Blocks an agent talked into anything may write (docs/SECURITY.md, "Agent"): the whole gateway with the
 * hostile agent (test/agents/hostile-agent.mjs `bad <kind>`) on the process runtime and in a container on a
 * real dockerd. A megabyte session id, one with a NUL or half a UTF-16 pair, JSON nested 100,000 deep,
 * invalid UTF-8, thousands of files and a 100,000-character path, a megabyte error and absurd usage are each
 * bounded with a named reason in the log; nothing unbounded reaches `sessions`, `session_log`,
 * `outbound_files` or `actions`; the chat is answered after every one of them.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { E2E_ENV, seedGroups } from '../channels/support.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { AGENT_RUNTIMES, useAgentRuntime, type RuntimeUnderTest } from '../helpers/runtimes.js';

const CHAT = 'web:bad';
const KINDS = ['session-huge', 'session-nul', 'session-surrogate', 'deep', 'utf8', 'files', 'error', 'usage'];

/** A logger whose lines are kept, one string each (JSON, as gated logs for a shipper). */
function capturedLog(lines: string[]) {
  return pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  );
}

const said = (g: Gated) =>
  g.db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
    .pluck()
    .all(CHAT) as string[];

async function badBlocks(rt: RuntimeUnderTest): Promise<void> {
  const lines: string[] = [];
  const g = await startTestGated({
    http: false,
    graceMs: 2000,
    log: capturedLog(lines),
    env: { ...E2E_ENV, ...rt.env() },
    seed: (db, config) => seedGroups(db, config.groupsDir, { groups: [['bad', 'Bad']], routes: [] }),
  });
  for (const [i, kind] of KINDS.entries()) {
    const before = said(g).length;
    g.gateway.sink({ chat_jid: CHAT, sender: 'mallory', content: `bad ${kind}` });
    await until(() => said(g).length > before, rt.ms(20_000), `an answer to bad ${kind}`);
    // The chat goes on after each: the next message is answered.
    g.gateway.sink({ chat_jid: CHAT, sender: 'mallory', content: `canary ${i}` });
    await until(() => said(g).includes(`echo: canary ${i}`), rt.ms(20_000), `canary ${i} after bad ${kind}`);
  }
  const replies = said(g);
  for (const r of ['huge session id', 'nul session id', 'surrogate session id', 'after deep', 'many files'])
    expect(replies).toContain(r);
  expect(replies).toContain('bytes \ufffd\ufffd\ufffd and a \u0000 nul');

  // Each bounded by name.
  const log = lines.join('');
  for (const reason of [
    'newSessionId ignored: longer than 256 characters',
    'newSessionId ignored: control characters',
    'newSessionId ignored: a lone surrogate (not valid Unicode)',
    'nested deeper than 64 levels',
  ])
    expect(log).toContain(reason);

  // Nothing unbounded stored: no session id at all (none was acceptable), short errors, finite usage.
  expect(g.db.prepare(`SELECT count(*) FROM sessions`).pluck().get()).toBe(0);
  const runs = g.db
    .prepare(
      `SELECT max(length(coalesce(session_id, ''))) AS sid, max(length(error)) AS err,
              max(length(stderr_tail)) AS stderr, max(input_tokens) AS tokens, max(cost_usd) AS cost
         FROM session_log`,
    )
    .get() as { sid: number; err: number | null; stderr: number | null; tokens: number; cost: number };
  expect(runs.sid).toBe(0);
  expect(runs.err ?? 0).toBeLessThanOrEqual(2000);
  expect(runs.stderr ?? 0).toBeLessThanOrEqual(64 * 1024);
  expect(runs.tokens).toBeLessThanOrEqual(1e9);
  expect(runs.cost).toBeLessThanOrEqual(1e9);
  // 2,001 files named: ten checked, one refusal for the rest; the 100,000-character path stored cut short.
  const files = g.db.prepare(`SELECT path, error FROM outbound_files ORDER BY message_id, seq`).all() as {
    path: string;
    error: string;
  }[];
  expect(files).toHaveLength(11);
  expect(files[0]!.error).toBe('path longer than 4096 characters');
  expect(Math.max(...files.map((f) => f.path.length))).toBeLessThanOrEqual(4096);
  expect(files[10]!.error).toBe('more than 10 files in one block (2001 named)');
  // The nested actions never reached the applier.
  expect(g.db.prepare(`SELECT count(*) FROM actions`).pluck().get()).toBe(0);
  expect(g.db.prepare(`SELECT max(length(content)) FROM messages`).pluck().get()).toBeLessThan(64 * 1024);
}

describe.each(AGENT_RUNTIMES)('on the %s runtime', (kind) => {
  const rt = useAgentRuntime(kind, 'hostile-agent.mjs');
  test(
    'malformed and oversized block fields are bounded by name, nothing unbounded is stored, the chat goes on',
    () => badBlocks(rt),
    rt.ms(90_000),
  );
});
