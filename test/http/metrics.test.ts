import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../core/metrics.js';
import { endedRunOf, startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { postJson, startWebServer } from './harness.js';

/** Parses Prometheus text exposition into `name{labels}` → value (labels as written, sorted by prom-client). */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (!m) throw new Error(`unparseable metrics line: ${line}`);
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

async function scrape(url: string): Promise<Map<string, number>> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(await res.text());
}

describe('/metrics', () => {
  it('moves every counter by exactly the traffic reported', async () => {
    const s = await startWebServer();
    const before = await scrape(s.url);
    const m = s.metrics;
    for (let i = 0; i < 3; i++) m.messagesIn('web', 'message');
    m.messagesIn('telegram', 'mention');
    m.messagesIn('telegram', 'mention');
    m.messagesIn('bluesky', 'made-up-verb');
    for (let i = 0; i < 4; i++) m.routed('demo');
    m.routed('builtin:drop');
    m.unrouted();
    let held = 7;
    m.heldFrom({ heldCount: () => held });
    held = 2;
    m.runFinished('ok', 1.5);
    m.runFinished('ok', 0.2);
    m.runFinished('timeout', 600);
    // A run of 31.2 s that sat idle 30 s: 1.2 s of work; an idle time over the lifetime is cut to it.
    m.runFinished('stopped', 31.2, 30);
    m.runFinished('stopped', 2, 5);
    m.lanes(3, 1);
    m.outbound('delivered');
    m.outbound('delivered');
    m.outbound('retried');
    m.outbound('failed');
    m.pollTick(0.004);
    m.pollTick(0.02);
    const after = await scrape(s.url);
    const delta = (k: string) => (after.get(k) ?? NaN) - (before.get(k) ?? 0);
    expect(delta('gated_messages_in_total{platform="web",verb="message"}')).toBe(3);
    expect(delta('gated_messages_in_total{platform="telegram",verb="mention"}')).toBe(2);
    expect(delta('gated_messages_in_total{platform="bluesky",verb="other"}')).toBe(1);
    expect(delta('gated_routed_total{target="demo"}')).toBe(4);
    expect(delta('gated_routed_total{target="builtin:drop"}')).toBe(1);
    expect(delta('gated_unrouted_total')).toBe(1);
    expect(after.get('gated_held_messages')).toBe(2);
    expect(delta('gated_runs_total{result="ok"}')).toBe(2);
    expect(delta('gated_runs_total{result="timeout"}')).toBe(1);
    expect(delta('gated_runs_total{result="error"}')).toBe(0);
    expect(delta('gated_run_duration_seconds_count{result="ok"}')).toBe(2);
    expect(delta('gated_run_duration_seconds_sum{result="ok"}')).toBeCloseTo(1.7, 9);
    expect(delta('gated_run_duration_seconds_bucket{le="0.5",result="ok"}')).toBe(1);
    // Runs whose idle time is not given are in the lifetime only.
    expect(after.has('gated_run_work_seconds_count{result="ok"}')).toBe(false);
    expect(after.has('gated_run_idle_seconds_count{result="ok"}')).toBe(false);
    expect(delta('gated_run_work_seconds_count{result="stopped"}')).toBe(2);
    expect(delta('gated_run_work_seconds_sum{result="stopped"}')).toBeCloseTo(1.2, 9);
    expect(delta('gated_run_work_seconds_bucket{le="1",result="stopped"}')).toBe(1);
    expect(delta('gated_run_idle_seconds_sum{result="stopped"}')).toBeCloseTo(32, 9);
    expect(delta('gated_run_idle_seconds_bucket{le="2.5",result="stopped"}')).toBe(1);
    expect(delta('gated_run_idle_seconds_bucket{le="30",result="stopped"}')).toBe(2);
    expect(after.get('gated_lanes_active')).toBe(3);
    expect(after.get('gated_lanes_waiting')).toBe(1);
    expect(delta('gated_outbound_total{outcome="delivered"}')).toBe(2);
    expect(delta('gated_outbound_total{outcome="retried"}')).toBe(1);
    expect(delta('gated_outbound_total{outcome="failed"}')).toBe(1);
    expect(delta('gated_poll_tick_seconds_count')).toBe(2);
    expect(delta('gated_poll_tick_seconds_bucket{le="0.005"}')).toBe(1);
  });

  it('counts nothing for web posts by itself: the pipeline reports what it processed', async () => {
    const s = await startWebServer();
    const before = await scrape(s.url);
    await postJson(`${s.url}/api/chat/send`, { group: 'demo', content: 'x' });
    const after = await scrape(s.url);
    expect([...after].filter(([k, v]) => k.startsWith('gated_') && before.get(k) !== v)).toEqual([]);
  });

  it('keeps separate registries per instance', async () => {
    const a = createMetrics();
    const b = createMetrics();
    a.unrouted();
    expect(parse(await a.text()).get('gated_unrouted_total')).toBe(1);
    expect(parse(await b.text()).get('gated_unrouted_total')).toBe(0);
    const withProcess = createMetrics({ processMetrics: true });
    expect(parse(await withProcess.text()).has('gated_process_cpu_seconds_total')).toBe(true);
  });

  it('adds the messages counted between two scrapes once: none again at the next scrape', async () => {
    const m = createMetrics();
    const read = async () => parse(await m.text());
    const key = 'gated_messages_in_total{platform="web",verb="message"}';
    m.messagesIn('web', 'message');
    m.messagesIn('web', 'message');
    m.routed('demo');
    expect((await read()).get(key)).toBe(2);
    expect((await read()).get(key)).toBe(2);
    expect((await read()).get('gated_routed_total{target="demo"}')).toBe(1);
    m.messagesIn('web', 'message');
    // Made-up verbs on one platform are one label set, whatever their number.
    for (let i = 0; i < 5; i++) m.messagesIn('web', `verb-${i}`);
    const third = await read();
    expect(third.get(key)).toBe(3);
    expect(third.get('gated_messages_in_total{platform="web",verb="other"}')).toBe(5);
    expect([...third.keys()].filter((k) => k.startsWith('gated_messages_in_total{'))).toHaveLength(2);
  });
});

/** The agent of test/agents/slow-agent.mjs: 300 ms per turn. */
const SLOW_AGENT_CMD = 'node "$GATED_HOME/test/agents/slow-agent.mjs" 300';

describe('/metrics of a whole gated', () => {
  it('counts what one message did at each stage: in, routed, run, delivered; and an unrouted one', async () => {
    const g = await startTestGated({ channels: [], demo: true, env: { GATED_IDLE_TIMEOUT_MS: '300' } });
    const before = await scrape(g.url!);
    const sent = await postJson(`${g.url}/api/chat/send`, { group: 'demo', content: 'count me' });
    expect(sent.status).toBe(201);
    const id = sent.body.id as number;
    // No route takes a telegram chat here: stored, counted as unrouted, never run.
    g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'someone', content: 'lost' });
    const reply = (col: string) =>
      g.db.prepare(`SELECT ${col} FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`).pluck().get(id);
    await until(() => reply('delivery') === 'sent', 15_000, 'the reply delivered');
    await until(
      () => g.db.prepare(`SELECT result FROM session_log WHERE result IS NOT NULL`).pluck().get(),
      15_000,
      'the run to end',
    );
    expect(reply('content')).toContain('count me');
    const after = await until(
      async () => {
        const m = await scrape(g.url!);
        // The run's end is counted once its rows are settled, just after session_log has its result.
        return (
          m.get('gated_runs_total{result="ok"}') === (before.get('gated_runs_total{result="ok"}') ?? 0) + 1 &&
          m
        );
      },
      5000,
      'the run counted',
    );
    const delta = (k: string) => (after.get(k) ?? NaN) - (before.get(k) ?? 0);
    expect(delta('gated_messages_in_total{platform="web",verb="message"}')).toBe(1);
    expect(delta('gated_messages_in_total{platform="telegram",verb="message"}')).toBe(1);
    expect(delta('gated_routed_total{target="demo"}')).toBe(1);
    expect(delta('gated_unrouted_total')).toBe(1);
    expect(delta('gated_run_duration_seconds_count{result="ok"}')).toBe(1);
    expect(delta('gated_runs_total{result="error"}')).toBe(0);
    expect(delta('gated_outbound_total{outcome="delivered"}')).toBe(1);
    expect(delta('gated_outbound_total{outcome="failed"}')).toBe(0);
    expect(delta('gated_rows_failed_total{stage="gateway"}')).toBe(0);
    expect(delta('gated_poll_tick_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(after.get('gated_lanes_active')).toBe(0);
    expect(after.get('gated_held_messages')).toBe(0);
  });

  it('splits a run into work and idle: a 300 ms turn and a 1 s idle timeout', async () => {
    const idleTimeoutMs = 1000;
    const g = await startTestGated({
      channels: [],
      demo: true,
      graceMs: 2000,
      env: { GATED_AGENT_CMD: SLOW_AGENT_CMD, GATED_IDLE_TIMEOUT_MS: String(idleTimeoutMs) },
    });
    const before = await scrape(g.url!);
    const id = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'take your time' })!;
    const run = await endedRunOf(g, id, 20_000);
    expect(run.result).toBe('ok');
    const idleMs = run.idle_ms!;
    expect(idleMs).not.toBeNull();
    const after = await until(
      async () => {
        const m = await scrape(g.url!);
        const ok = 'gated_run_idle_seconds_count{result="ok"}';
        return m.get(ok) === (before.get(ok) ?? 0) + 1 && m;
      },
      5000,
      'the run observed',
    );
    const delta = (k: string) => (after.get(k) ?? NaN) - (before.get(k) ?? 0);
    const work = delta('gated_run_work_seconds_sum{result="ok"}');
    const idle = delta('gated_run_idle_seconds_sum{result="ok"}');
    expect(delta('gated_run_work_seconds_count{result="ok"}')).toBe(1);
    // Work: the agent's start (about 0.2 s on a quiet machine, 1.5 s allowed under load) and its 300 ms turn.
    expect(work).toBeGreaterThanOrEqual(0.3);
    expect(work).toBeLessThan(0.3 + 1.5);
    // Idle: the idle timeout, and the agent's exit once its stdin closed; never the turn.
    expect(idle).toBeGreaterThanOrEqual(idleTimeoutMs / 1000);
    expect(idle).toBeLessThan(idleTimeoutMs / 1000 + 0.5);
    // The same split as session_log's (and the dashboard's), adding up to the lifetime.
    const lifetimeMs = Date.parse(run.ended_at) - Date.parse(run.started_at);
    expect(idle).toBeCloseTo(idleMs / 1000, 9);
    expect(work).toBeCloseTo((lifetimeMs - idleMs) / 1000, 9);
    expect(work + idle).toBeCloseTo(delta('gated_run_duration_seconds_sum{result="ok"}'), 9);
    // A 1 s idle wait in the lifetime, none of it in the work: they fall in different buckets.
    expect(delta('gated_run_work_seconds_bucket{le="0.25",result="ok"}')).toBe(0);
    expect(delta('gated_run_idle_seconds_bucket{le="0.5",result="ok"}')).toBe(0);
    expect(delta('gated_run_duration_seconds_bucket{le="1",result="ok"}')).toBe(0);
  }, 30_000);
});
