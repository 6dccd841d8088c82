import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { createQueue } from '../../queue/queue.js';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import type { WorkQueue } from '../../queue/types.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { ready } from './helpers.js';
import { recordingSignals } from '../helpers/signals.js';

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(2000);
});

describe('the example agent under the process runtime (the embedded default)', () => {
  it('answers, takes a follow-up in the same run, keeps its session for the next run', async () => {
    const { db } = freshDb();
    const groups = tempDir('gated-example-');
    mkdirSync(join(groups, 'demo'));
    // The default GATED_AGENT_CMD, exactly as `npm start` runs it.
    const config = loadConfig({ GATED_GROUPS_DIR: groups, GATED_IDLE_TIMEOUT_MS: '400' });
    const { signals, outbound } = recordingSignals();
    const queue = createQueue({
      db,
      runtime: createProcessRuntime({ cmd: config.agentCmd }),
      config,
      log: silentLogger(),
      signals,
    });
    queues.push(queue);
    const key = { group: 'demo', topic: '' };
    const replies = () =>
      db.prepare('SELECT content FROM messages WHERE is_from_me = 1 ORDER BY id').pluck().all() as string[];

    const t0 = Date.now();
    ready(db, { group: 'demo', chat: 'web:demo', content: 'first question' });
    queue.wake();
    await vi.waitFor(() => expect(outbound).toHaveLength(1), { timeout: 10_000, interval: 5 });
    const firstMs = Date.now() - t0;

    const t1 = Date.now();
    ready(db, { group: 'demo', chat: 'web:demo', content: 'follow-up' });
    queue.wake();
    await vi.waitFor(() => expect(outbound).toHaveLength(2), { timeout: 10_000, interval: 5 });
    const followMs = Date.now() - t1;
    expect(replies()).toEqual(['echo: first question', 'echo: follow-up']);
    expect(db.prepare('SELECT count(*) FROM session_log').pluck().get()).toBe(1);

    await vi.waitFor(() => expect(queue.facts(key).running).toBe(false), { timeout: 10_000 });
    const session = db.prepare('SELECT session_id FROM sessions').pluck().get() as string;
    expect(session).toMatch(/^example-/);
    expect(db.prepare('SELECT result, messages, replies FROM session_log').get()).toEqual({
      result: 'ok',
      messages: 2,
      replies: 2,
    });

    ready(db, { group: 'demo', chat: 'web:demo', content: 'next day' });
    queue.wake();
    await vi.waitFor(() => expect(outbound).toHaveLength(3), { timeout: 10_000, interval: 5 });
    expect(db.prepare('SELECT session_id FROM session_log ORDER BY id DESC LIMIT 1').pluck().get()).toBe(
      session,
    );
    expect(db.prepare('SELECT session_id FROM sessions').pluck().get()).toBe(session);
    console.info(
      `process: message → reply row ${firstMs} ms (spawn + node start); follow-up → reply ${followMs} ms`,
    );
  });
});
