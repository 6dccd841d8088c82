import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/log.js';
import { Signal } from '../../core/signals.js';
import { endSpan, inSpan, startMessage } from '../../core/trace.js';
import { createWorker } from '../../core/worker.js';
import { startTracing } from '../../gated/tracing.js';
import { closeTestGated, endedRunOf, startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../infra/otlp.js';

let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

type Line = Record<string, unknown> & { msg: string; trace_id?: string; span_id?: string };

/** A JSON logger whose lines the test reads, as gated writes them off a terminal. */
function capturedLogger() {
  const lines: Line[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of String(chunk).split('\n')) if (text.trim()) lines.push(JSON.parse(text) as Line);
      done();
    },
  });
  return { log: createLogger('debug', false, out), lines };
}

/** The one span named `name` among `spans`. */
function one(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.filter((s) => s.name === name);
  expect(
    found.map((s) => s.name),
    name,
  ).toEqual([name]);
  return found[0]!;
}

describe('trace ids in the logs', () => {
  it("every line of a message's way (steps, run, delivery) carries its trace and a span of it", async () => {
    receiver = await startOtlpReceiver();
    const { log, lines } = capturedLogger();
    const g = await startTestGated({
      demo: true,
      channels: [],
      log,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        GATED_RUNTIME: 'process',
        GATED_POLL_MS: '50',
        GATED_IDLE_TIMEOUT_MS: '300',
      },
      // A chat routed to a group nobody registered: the route step says so in a line of its own.
      seed: (db) =>
        void db
          .prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'chat_jid=web:ghost', 'ghost')`)
          .run(),
    });
    const asked = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'trace me' })!;
    const reply = await until(
      () =>
        g.db
          .prepare(`SELECT id FROM messages WHERE reply_to_id = ? AND delivery = 'sent'`)
          .pluck()
          .get(asked) as number | undefined,
      15_000,
      'the reply delivered',
    );
    const { id: runId } = await endedRunOf(g, asked, 15_000);
    const lost = g.gateway.sink({ chat_jid: 'web:ghost', sender: 'me', content: 'anyone?' })!;
    await until(
      () => g.db.prepare(`SELECT state FROM messages WHERE id = ?`).pluck().get(lost) === 'unrouted',
      15_000,
      'the unrouted message',
    );
    await closeTestGated(g);

    const spans = receiver.spans;
    const rootOf = (id: number) =>
      spans.find((s) => s.name === 'message' && s.attributes['gated.message.id'] === id)!;
    const traceA = rootOf(asked).traceId;
    const traceB = rootOf(lost).traceId;
    const inA = spans.filter((s) => s.traceId === traceA);

    // Every line that carries a trace names a span that trace exported: no id points nowhere.
    const spansOf = new Map<string, Set<string>>();
    for (const s of spans) spansOf.set(s.traceId, (spansOf.get(s.traceId) ?? new Set()).add(s.spanId));
    const traced = lines.filter((l) => l.trace_id !== undefined);
    expect(traced.length).toBeGreaterThan(0);
    for (const l of traced) expect(spansOf.get(l.trace_id!)?.has(l.span_id!), JSON.stringify(l)).toBe(true);

    // The lines about the first message, its run and its reply all carry the message's trace.
    const ofA = lines.filter((l) => l.msgId === asked || l.runId === runId || l.row === reply);
    for (const l of ofA) expect(l.trace_id, JSON.stringify(l)).toBe(traceA);
    const said = (msg: string) => ofA.find((l) => l.msg === msg);
    for (const msg of [
      'run starting',
      'idle timeout: closing stdin',
      'run ended',
      'part delivered',
      'reply delivered',
    ])
      expect(said(msg), msg).toBeDefined();
    // ... each under the span of its stage.
    const run = one(inA, 'run');
    expect(said('run starting')!.span_id).toBe(run.spanId);
    expect(said('run ended')!.span_id).toBe(run.spanId);
    expect(said('idle timeout: closing stdin')!.span_id).toBe(run.spanId);
    expect(said('part delivered')!.span_id).toBe(one(inA, 'deliver part').spanId);
    expect(said('reply delivered')!.span_id).toBe(one(inA, 'deliver').spanId);

    // The route step's line about the second message is in that message's trace, under the step.
    const notDispatched = lines.find((l) => l.msgId === lost)!;
    expect(notDispatched.msg).toBe('message not dispatched: group not registered');
    expect(notDispatched.trace_id).toBe(traceB);
    const route = spans.find((s) => s.traceId === traceB && s.name === 'step route')!;
    expect(notDispatched.span_id).toBe(route.spanId);

    // Work of no message (the start, the exporter's own line) carries no trace.
    expect(lines.find((l) => l.msg === 'traces exported over OTLP/HTTP')?.trace_id).toBeUndefined();
  }, 60_000);

  it('work a stage does for itself (a worker step, a signal listener, their timers) carries no trace of whoever woke it', async () => {
    receiver = await startOtlpReceiver();
    const { log, lines } = capturedLogger();
    const tracing = (await startTracing(
      { traces: { url: `${receiver.url}/v1/traces`, serviceName: 'gated' } },
      log,
    ))!;
    const worker = createWorker({
      name: 'test worker',
      log,
      step: () => {
        log.info('step ran');
        setTimeout(() => log.info('timer of the step'), 0);
      },
    });
    try {
      worker.start();
      await until(() => lines.some((l) => l.msg === 'timer of the step'), 5000, 'the first step');
      const signal = new Signal('test', () => undefined);
      signal.on(() => {
        log.info('listener ran');
        setTimeout(() => log.info('timer of the listener'), 0);
      });
      const span = startMessage({ id: 1, chat_jid: 'web:x', verb: 'message' });
      inSpan(span, () => {
        log.info('in the span');
        setTimeout(() => log.info('timer of the span'), 0);
        worker.wake();
        signal.fire();
      });
      endSpan(span);
      await until(
        () =>
          lines.filter((l) => l.msg === 'timer of the step').length === 2 &&
          lines.some((l) => l.msg === 'timer of the span'),
        5000,
        'the woken step and the timers',
      );
      const traceId = span!.spanContext().traceId;
      const traceOf = (msg: string) => lines.filter((l) => l.msg === msg).map((l) => l.trace_id ?? null);
      // What the span's own work starts stays in its trace...
      expect(traceOf('in the span')).toEqual([traceId]);
      expect(traceOf('timer of the span')).toEqual([traceId]);
      // ... what it only wakes does not.
      expect(traceOf('step ran')).toEqual([null, null]);
      expect(traceOf('timer of the step')).toEqual([null, null]);
      expect(traceOf('listener ran')).toEqual([null]);
      expect(traceOf('timer of the listener')).toEqual([null]);
    } finally {
      await worker.stop();
      await tracing.shutdown();
    }
  });
});
