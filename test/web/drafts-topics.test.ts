/**
 * Two topics (browser panes) of one web chat streaming at once: each pane gets its own draft, growing in
 * place, and its own answer once. The whole gated with the files agent; the panes are SSE clients.
 */
import { afterEach, expect, it } from 'vitest';
import { FILES_AGENT_CMD, startDemoGated } from '../helpers/gated.js';
import { postJson } from '../http/harness.js';
import { SseClient } from '../http/sse-client.js';

const clients: SseClient[] = [];
afterEach(() => {
  while (clients.length) clients.pop()!.close();
});

it('two topics of one chat stream two drafts, each shown only in its pane and ending as its answer once', async () => {
  const gated = await startDemoGated({ GATED_AGENT_CMD: FILES_AGENT_CMD, GATED_IDLE_TIMEOUT_MS: '2000' });
  const url = gated.url!;
  const panes = new Map<string, SseClient>();
  for (const topic of ['a', 'b']) {
    const c = await SseClient.open(`${url}/api/chat/stream?group=demo&topic=${topic}`);
    clients.push(c);
    panes.set(topic, c);
    await c.waitFor('ready', 1);
  }
  for (const topic of ['a', 'b']) {
    const r = await postJson(`${url}/api/chat/send`, { group: 'demo', topic, content: 'stream 8' });
    expect(r.status).toBe(201);
  }
  const final = 'final: word1 word2 word3 word4 word5 word6 word7 word8 done';
  for (const topic of ['a', 'b']) {
    const pane = panes.get(topic)!;
    const [answer] = await pane.waitFor('message', 2, 30_000).then((evs) => evs.slice(1));
    expect(JSON.parse(answer!.data)).toMatchObject({ role: 'agent', content: final, topic });
    const drafts = pane.events
      .filter((e) => e.event === 'draft')
      .map((e) => JSON.parse(e.data) as { id: string; text: string | null });
    // One draft in this pane, from its own topic, growing in place (each text longer than the last), at
    // least 3 texts, then removed before the answer.
    const ids = new Set(drafts.map((d) => d.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]!.endsWith(`:${topic}`)).toBe(true);
    const texts = drafts.map((d) => d.text).filter((t): t is string => t !== null);
    expect(new Set(texts).size).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < texts.length; i++) expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
    expect(drafts.at(-1)!.text).toBeNull();
    const lastDraft = pane.events.findLastIndex((e) => e.event === 'draft');
    expect(lastDraft).toBeLessThan(pane.events.indexOf(answer!));
    // The answer once.
    const answers = pane.events.filter(
      (e) => e.event === 'message' && (JSON.parse(e.data) as { content: string }).content === final,
    );
    expect(answers).toHaveLength(1);
  }
  expect(gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
}, 60_000);
