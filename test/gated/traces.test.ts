import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { tracingOn } from '../../core/trace.js';
import { startGated, type Gated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../infra/otlp.js';

let gated: Gated | undefined;
let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await gated?.close(1000);
  await receiver?.close();
  gated = receiver = undefined;
});

/** A whole gated (process runtime, the example agent, the demo group) exporting traces to `receiver`. */
async function start(env: Record<string, string>) {
  const dir = tempDir();
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_HTTP_PORT: '0',
    GATED_IDLE_TIMEOUT_MS: '5000',
    ...env,
  });
  gated = await startGated({ config, log: silentLogger(), channels: [], demo: true });
  return gated;
}

/** Waits until the reply to inbound row `id` is delivered; returns the reply's row id. */
async function delivered(g: Gated, id: number): Promise<number> {
  return until(
    () =>
      g.db.prepare(`SELECT id FROM messages WHERE reply_to_id = ? AND delivery = 'sent'`).pluck().get(id) as
        number | undefined,
    15_000,
    `the reply to ${id}`,
  );
}

function byName(spans: ReceivedSpan[], name: string): ReceivedSpan[] {
  return spans.filter((s) => s.name === name);
}

function one(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = byName(spans, name);
  expect(found.map((s) => s.name)).toEqual([name]);
  return found[0]!;
}

describe('traces', () => {
  it('exports one trace per message: steps, wait, run, turn and each delivered part', async () => {
    receiver = await startOtlpReceiver();
    const g = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'gated-test' });
    expect(tracingOn()).toBe(true);
    const first = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'first words zqxj' })!;
    const firstReply = await delivered(g, first);
    // The agent waits for follow-ups (idle timeout 5 s): the second message is turn 2 of the same run.
    const second = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'second words wvkq' })!;
    await delivered(g, second);
    await g.close(1000);
    gated = undefined;
    expect(tracingOn()).toBe(false);

    const spans = receiver.spans;
    expect(receiver.refused).toEqual([]);
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(['gated-test']));
    const roots = byName(spans, 'message');
    expect(roots.map((r) => r.attributes['gated.message.id'])).toEqual([first, second]);
    const [r1, r2] = roots as [ReceivedSpan, ReceivedSpan];
    expect(r1.traceId).not.toBe(r2.traceId);
    expect(r1.parentSpanId).toBe('');
    expect(r1.attributes).toMatchObject({
      'gated.chat': 'web:demo',
      'gated.group': 'demo',
      'gated.handled_by': 'gate',
    });

    // Everything of the first message is in its trace, hung under the spans it belongs to.
    const t1 = spans.filter((s) => s.traceId === r1.traceId);
    const steps = t1.filter((s) => s.name.startsWith('step '));
    expect(steps.map((s) => s.name)).toEqual([
      'step sticky',
      'step command',
      'step prefix',
      'step route',
      'step access',
      'step gate',
    ]);
    for (const s of steps) expect(s.parentSpanId).toBe(r1.spanId);
    expect(one(t1, 'wait').parentSpanId).toBe(r1.spanId);
    const run = one(t1, 'run');
    expect(run.parentSpanId).toBe(r1.spanId);
    expect(run.attributes).toMatchObject({
      'gated.group': 'demo',
      'gated.result': 'ok',
      'gated.messages': 1,
    });
    const turn1 = one(t1, 'turn');
    expect(turn1.parentSpanId).toBe(run.spanId);
    expect(turn1.attributes['gated.turn']).toBe(1);
    const deliver = one(t1, 'deliver');
    expect(deliver.parentSpanId).toBe(r1.spanId);
    expect(deliver.attributes).toMatchObject({ 'gated.outbound.id': firstReply, 'gated.message.id': first });
    const part = one(t1, 'deliver part');
    expect(part.parentSpanId).toBe(deliver.spanId);
    expect(part.attributes['gated.part.index']).toBe(0);
    // Each span ends after it starts, and the order of the stages shows in the times.
    for (const s of t1) expect(s.endNs >= s.startNs).toBe(true);
    expect(turn1.startNs >= r1.startNs && deliver.startNs >= turn1.startNs).toBe(true);

    // The follow-up has a trace of its own: its turn (2) is linked to the run of the first trace.
    const t2 = spans.filter((s) => s.traceId === r2.traceId);
    const turn2 = one(t2, 'turn');
    expect(turn2.parentSpanId).toBe(r2.spanId);
    expect(turn2.attributes['gated.turn']).toBe(2);
    expect(turn2.links).toContainEqual({ traceId: r1.traceId, spanId: run.spanId });
    expect(one(t2, 'wait').parentSpanId).toBe(r2.spanId);
    expect(one(t2, 'deliver part').parentSpanId).toBe(one(t2, 'deliver').spanId);
    expect(byName(t2, 'run')).toEqual([]);

    // No message text (nor the agent's echo of it) ever leaves in a span. The texts' marks have letters
    // past `f`: a hex mark (`7f3a`) turned up by chance inside an exported trace or span id now and then.
    const exported = receiver.bodies.join('\n');
    expect(exported).toContain(r1.traceId);
    expect(exported).not.toContain('zqxj');
    expect(exported).not.toContain('wvkq');
  });

  it('a collector that never answers holds back no message, and the stop waits for it 5 s at most', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((s) => void sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as { port: number }).port;
    try {
      const g = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` });
      const id = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'anyone there?' })!;
      await delivered(g, id);
      // Wait for the first export to be under way (the exporter connected), then stop.
      await until(() => sockets.size > 0, 10_000, 'an export to the silent collector');
      const t0 = Date.now();
      await g.close(1000);
      gated = undefined;
      const took = Date.now() - t0;
      expect(took).toBeLessThan(8000);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  }, 30_000);

  it('is off without an endpoint; the endpoint settings give the traces URL or are refused by name', async () => {
    const g = await start({});
    expect(g.config.traces).toBeUndefined();
    expect(tracingOn()).toBe(false);
    const id = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'untraced' })!;
    await delivered(g, id);

    const traces = (env: Record<string, string>) => loadConfig({ GATED_DB: ':memory:', ...env }).traces;
    expect(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({
      url: 'http://collector:4318/v1/traces',
      serviceName: 'gated',
    });
    expect(
      traces({ GATED_OTEL_ENDPOINT: 'https://otel.example', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' })?.url,
    ).toBe('https://otel.example/v1/traces');
    expect(
      traces({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x',
      })?.url,
    ).toBe('http://c:4318/custom');
    expect(() => traces({ GATED_OTEL_ENDPOINT: 'collector:4318' })).toThrow(
      /GATED_OTEL_ENDPOINT must be an http\(s\) URL/,
    );
  });
});
