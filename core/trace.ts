import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Context, Link, Span } from '@opentelemetry/api';

/**
 * One trace per inbound message (docs/OPERATIONS.md, "Traces"). The stages share rows, not calls, so a
 * message's trace travels beside its row id: the pipeline opens the message's root span and remembers its
 * context here; the queue, the run and delivery look the context up by the row id and hang their spans
 * under it. Off (every function returns at once) until gated/tracing.ts registers an exporter.
 *
 * Attributes name rows, chats, groups and runs; never a message's text, a sender's name or a secret.
 * The contexts live in this process only: a message that a restart interrupted starts a new trace.
 */

/** A message's trace as the later stages need it. */
interface MessageTrace {
  ctx: Context;
  /** Epoch ms when the row left the gateway's steps (held or routed); the wait span starts there. */
  waitFrom: number | undefined;
}

/** Most messages whose trace context is remembered; the oldest are forgotten first. */
const REMEMBERED = 10_000;

let active = false;
const traces = new Map<number, MessageTrace>();
/**
 * The OpenTelemetry API, given by gated/tracing.ts when it turns tracing on: while tracing is off (the
 * default) it is not even loaded (about 20 ms and 46 files of every start and CLI call). Every use below
 * is behind `active` or a span that only exists while it is on.
 */
let otel: typeof OtelApi | undefined;

/** Turns tracing on (with the API the exporter was registered with) or off (null). */
export function setTracing(api: typeof OtelApi | null): void {
  if (api) otel = api;
  active = api !== null;
  if (!active) traces.clear();
}

/** The API while tracing is on. */
function o(): typeof OtelApi {
  if (!otel) throw new Error('core/trace.ts: a span was asked for while tracing is off');
  return otel;
}

/** True while spans are exported. */
export function tracingOn(): boolean {
  return active;
}

/**
 * The trace of the work in progress, for its log lines (core/log.ts adds them to every line): the active
 * span's ids, or nothing while tracing is off or no span is active. A new object each call (pino merges
 * the line's own fields into it).
 */
export function logTraceFields(): { trace_id?: string; span_id?: string } {
  if (!active) return {};
  const span = o().trace.getSpan(o().context.active());
  const sc = span?.spanContext();
  return sc && o().isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}

/**
 * Runs `fn` with `span` active: the lines it logs, and those of the timers, streams and promises it starts,
 * carry the span's trace (gated/tracing.ts registers the context manager that carries it across awaits).
 */
export function inSpan<T>(span: Span | undefined, fn: () => T): T {
  return active && span ? o().context.with(o().trace.setSpan(o().ROOT_CONTEXT, span), fn) : fn();
}

/**
 * Runs `fn` with no span active: a stage's own work (a worker's step, a signal's listener, the queue's
 * pump) never inherits the trace of whatever woke it, so its lines carry only the traces it sets itself.
 */
export function detached<T>(fn: () => T): T {
  return active ? o().context.with(o().ROOT_CONTEXT, fn) : fn();
}

function tracer() {
  return o().trace.getTracer('gated');
}

/** Starts a span under `parent` (a message's context; none: a new trace). */
function start(
  name: string,
  parent: Context | undefined,
  attributes: Attributes,
  extra: { startTime?: number; links?: Link[] } = {},
): Span {
  return tracer().startSpan(name, { attributes, ...extra }, parent ?? o().ROOT_CONTEXT);
}

/** Ends `span`, marked as an error when `error` is given. */
export function endSpan(span: Span | undefined, error?: string, at?: number): void {
  if (!span) return;
  if (error !== undefined) span.setStatus({ code: o().SpanStatusCode.ERROR, message: error });
  span.end(at);
}

/** The inbound row a root span describes. */
export interface TracedRow {
  id: number;
  chat_jid: string;
  verb: string;
}

/** Opens the root span of an inbound row (`message`), or undefined while tracing is off. */
export function startMessage(row: TracedRow): Span | undefined {
  if (!active) return undefined;
  const span = start('message', undefined, {
    'gated.message.id': row.id,
    'gated.chat': row.chat_jid,
    'gated.verb': row.verb,
  });
  if (traces.size >= REMEMBERED) traces.delete(traces.keys().next().value!);
  traces.set(row.id, { ctx: o().trace.setSpan(o().ROOT_CONTEXT, span), waitFrom: undefined });
  return span;
}

/** Runs `fn` as a child span of the message's root (a gateway step); its result becomes `gated.outcome`. */
export function stepSpan<T extends string>(root: Span | undefined, name: string, fn: () => T): T {
  if (!root) return fn();
  const span = start(`step ${name}`, o().trace.setSpan(o().ROOT_CONTEXT, root), { 'gated.step': name });
  try {
    const outcome = inSpan(span, fn);
    span.setAttribute('gated.outcome', outcome);
    return outcome;
  } catch (err) {
    endSpan(span, err instanceof Error ? err.message : String(err));
    throw err;
  } finally {
    if (span.isRecording()) span.end();
  }
}

/** How the steps ended for a row: the step that handled it, its group, whether it is held for a run. */
export interface RowEnd {
  id: number;
  step: string | null;
  group: string | null;
  held: boolean;
  error?: string;
}

/** Closes the root span after the steps; a row held for its group starts waiting for its run now. */
export function endMessage(root: Span | undefined, row: RowEnd, at: number): void {
  if (!root) return;
  if (row.step !== null) root.setAttribute('gated.handled_by', row.step);
  if (row.group !== null) root.setAttribute('gated.group', row.group);
  const t = traces.get(row.id);
  if (t && row.held) t.waitFrom = at;
  endSpan(root, row.error, at);
}

/** The context of a message's trace, when this process opened it. */
function messageContext(id: number | null | undefined): Context | undefined {
  return id === null || id === undefined ? undefined : traces.get(id)?.ctx;
}

/** A run or a turn as spans describe it. */
export interface TracedRun {
  runId: number;
  group: string;
  topic: string;
  chatJid: string;
}

/**
 * The spans of one run: `run` under the trace of its first message (linked to the traces of the others),
 * and one `turn` per line written to the agent, from the write to the block that answers it. Rows reaching
 * the agent close their `wait` span (from the gate step: the impulse hold and the lane's queue).
 */
export class RunTrace {
  private run: Span | undefined;
  /** The run span's context, kept after it ended (the run's last lines are written after its span). */
  private ctx: Context | undefined;
  private readonly turns = new Map<number, Span>();

  constructor(private readonly info: TracedRun) {}

  /** Turn 1, the run's input, is written with rows `ids`. */
  begin(ids: readonly number[], now: number): void {
    if (!active || ids.length === 0) return;
    this.run = start('run', messageContext(ids[0]), this.attributes(ids.length), {
      links: linksTo(ids.slice(1)),
      startTime: now,
    });
    this.ctx = o().trace.setSpan(o().ROOT_CONTEXT, this.run);
    this.opened(1, ids, this.ctx, [], now);
  }

  /**
   * Runs `fn` in the run's trace: its log lines, and those of what it starts (the agent, its timers),
   * carry the run span's ids. The run's starts and its reading of the agent go through here.
   */
  within<T>(fn: () => T): T {
    return active && this.ctx ? o().context.with(this.ctx, fn) : fn();
  }

  /** `fn` bound to the run's trace: for a stream the run reads, whose events come from wherever it was made. */
  bind<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void {
    return (...args) => this.within(() => fn(...args));
  }

  /** Follow-up turn `turn` is written with rows `ids`: its span belongs to its first row's trace. */
  turn(turn: number, ids: readonly number[], now: number): void {
    if (!this.run || ids.length === 0) return;
    const parent = messageContext(ids[0]) ?? o().trace.setSpan(o().ROOT_CONTEXT, this.run);
    this.opened(turn, ids, parent, [{ context: this.run.spanContext() }, ...linksTo(ids.slice(1))], now);
  }

  /** Turns up to `through` are answered (their block committed). */
  answered(through: number, now: number): void {
    for (const [n, span] of this.turns) {
      if (n > through) continue;
      span.end(now);
      this.turns.delete(n);
    }
  }

  /** The run ended with `result`; turns still open end unanswered. */
  end(result: string, error: string | null, now: number): void {
    for (const span of this.turns.values()) endSpan(span, 'not answered', now);
    this.turns.clear();
    this.run?.setAttribute('gated.result', result);
    endSpan(this.run, error ?? undefined, now);
    this.run = undefined;
  }

  private opened(turn: number, ids: readonly number[], parent: Context, links: Link[], now: number): void {
    for (const id of ids) {
      const t = traces.get(id);
      if (!t || t.waitFrom === undefined) continue;
      const attrs = { 'gated.message.id': id, 'gated.run.id': this.info.runId };
      start('wait', t.ctx, attrs, { startTime: t.waitFrom }).end(now);
      t.waitFrom = undefined;
    }
    const attrs = { ...this.attributes(ids.length), 'gated.turn': turn };
    this.turns.set(turn, start('turn', parent, attrs, { links, startTime: now }));
  }

  private attributes(messages: number): Attributes {
    const { runId, group, topic, chatJid } = this.info;
    return {
      'gated.run.id': runId,
      'gated.group': group,
      'gated.topic': topic,
      'gated.chat': chatJid,
      'gated.messages': messages,
    };
  }
}

/** Links to the root spans of the messages `ids` whose trace this process knows. */
function linksTo(ids: readonly number[]): Link[] {
  const links: Link[] = [];
  for (const id of ids) {
    const span = o().trace.getSpan(messageContext(id) ?? o().ROOT_CONTEXT);
    if (span) links.push({ context: span.spanContext() });
  }
  return links;
}

/**
 * Opens a delivery span for an outbound row, under the trace of the message it answers (if known); its
 * `gated.parts` is set once the row is split.
 */
export function startDelivery(row: {
  id: number;
  chat_jid: string;
  kind: string | null;
  reply_to_id: number | null;
}): Span | undefined {
  if (!active) return undefined;
  return start('deliver', messageContext(row.reply_to_id), {
    'gated.outbound.id': row.id,
    'gated.chat': row.chat_jid,
    'gated.kind': row.kind ?? 'reply',
    ...(row.reply_to_id !== null ? { 'gated.message.id': row.reply_to_id } : {}),
  });
}

/** Opens the span of one part's send (one attempt) under its row's delivery span. */
export function startPart(deliver: Span | undefined, index: number, attempt: number): Span | undefined {
  if (!deliver) return undefined;
  return start('deliver part', o().trace.setSpan(o().ROOT_CONTEXT, deliver), {
    'gated.part.index': index,
    'gated.attempt': attempt,
  });
}
