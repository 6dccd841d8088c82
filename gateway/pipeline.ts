import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import { parseJid, type Message } from '../core/types.js';
import { chatGroupOf } from './layers/route.js';
import type { LayerEnv, QueueControl } from './layers/types.js';
import { STEPS, StepWrites, type BatchOutcome, type RowWork } from './steps.js';
import { BatchStatements, BatchWork, type PolledRow } from './batch.js';
import type { Catalog } from '../store/routes.js';
import { ImpulseGate } from './impulse.js';
import { AccessGate } from './access.js';
import { AccessSource } from '../store/access.js';
import type { Db } from '../store/db.js';
import { inboundRowError, insertOutbound } from '../store/messages.js';
import { coerceError } from '../core/errors.js';
import { clipText } from '../core/text.js';
import type { RouteSource } from '../store/routes.js';
import { botUsernameKey, getState, StickyStore } from '../store/state.js';
import type { GatewayMetrics } from './metrics-hooks.js';
import { endMessage, inSpan, startMessage, stepSpan } from '../core/trace.js';
import type { Span } from '@opentelemetry/api';

export type { BatchOutcome } from './steps.js';

/** Dependencies of the pipeline, injected once. */
export interface PipelineOptions {
  db: Db;
  config: Pick<Config, 'admins'> & Partial<Pick<Config, 'configDir' | 'tz'>>;
  log: Logger;
  routes: RouteSource;
  queue: QueueControl;
  metrics?: GatewayMetrics;
  /**
   * The channels of this process: a channel's `identity` is the bot's username on its platform once it
   * connected (Telegram getMe), for `/cmd@bot` addressed elsewhere.
   */
  channels?: readonly BotChannel[];
  /** Transcription is on (docs/VOICE.md): rows with audio wait for their transcripts. */
  transcribe?: boolean;
}

/**
 * What the pipeline reads of a channel (`Channel` in channels/channel.ts has these members; written by shape
 * because gateway/ sits beside channels/, not above it).
 */
export interface BotChannel {
  readonly platform: string;
  readonly identity?: { readonly username?: string } | undefined;
}

/**
 * Pushes every message of a poll batch through the steps in order (STEPS in steps.ts: transcribe → sticky →
 * command → prefix → route → access → gate), then lets the impulse gate release the chats that got a held row. Runs
 * inside the batch transaction: every state change, answer row and the cursor commit together, so a crash
 * re-processes the whole batch and never half of it.
 */
export class Pipeline {
  readonly gate: ImpulseGate;
  /** The access decision (docs/ACCESS.md), between routing and the impulse gate. */
  readonly access: AccessGate;
  private readonly sticky: StickyStore;
  private readonly writes: StepWrites;
  private readonly batchSql: BatchStatements;

  constructor(private readonly opts: PipelineOptions) {
    const { db } = opts;
    this.gate = new ImpulseGate(db);
    this.access = new AccessGate(db, new AccessSource(db, opts.config.admins), opts.config.tz);
    this.sticky = new StickyStore(db);
    this.writes = new StepWrites(db);
    this.batchSql = new BatchStatements(db);
  }

  /**
   * Processes `rows` (call inside a transaction). A row that throws (a wrong-typed column, a layer's bug)
   * is rolled back alone, ends `failed` with its error, and the rows after it are processed as usual: a
   * plain message writes nothing until the batch places it (gateway/batch.ts), and a row that may write
   * more runs in a savepoint of its own.
   */
  process(rows: readonly PolledRow[], now: number): BatchOutcome {
    const out: BatchOutcome = { released: 0, outbound: 0, daemon: 0, decided: 0, effects: [] };
    const catalog = this.opts.routes.current();
    const touched = new Set<string>();
    const batch = new BatchWork(this.batchSql, this.sticky, now, (msg, err) => this.fail(msg, err));
    const env = this.env(out, catalog, batch, now);
    this.access.beginBatch();
    for (const msg of rows) this.row(msg, env, now, out, touched, batch);
    this.access.endBatch();
    if (this.access.letIn > 0) out.files = (out.files ?? 0) + 1;
    out.released += batch.finish(touched, (err) =>
      // The chats' rows stay held; the next tick or the maximum hold releases them.
      this.opts.log.error({ err: coerceError(err).message }, 'impulse gate failed for a batch'),
    );
    return out;
  }

  /** What the layers may read and do while this batch is processed. */
  private env(out: BatchOutcome, catalog: Catalog, batch: BatchWork, now: number): LayerEnv {
    const { db, log } = this.opts;
    return {
      db,
      config: this.opts.config,
      log,
      catalog,
      sticky: batch.sticky,
      queue: this.opts.queue,
      now,
      answer: (msg, text) => {
        batch.guard();
        insertOutbound(db, {
          chat_jid: msg.chat_jid,
          content: text,
          kind: 'gateway',
          reply_to_id: msg.id,
          reply_to: msg.platform_msg_id,
          topic: msg.topic,
        });
        out.outbound += 1;
      },
      finish: (msg, state, error) => {
        batch.guard();
        this.writes.end.run({ id: msg.id, state, target: null, route_id: null, error: error ?? null });
      },
      afterCommit: (fn) => out.effects.push(fn),
      decided: () => {
        out.decided += 1;
      },
      workflow: () => {
        out.workflows = (out.workflows ?? 0) + 1;
      },
      chatGroup: (passage) => chatGroupOf(passage, catalog.table),
      sessionTopic: (passage, group) =>
        passage.topic ?? (this.access.threadMode(group) === 'replies' ? '' : passage.msg.topic),
      botName: (jid) => {
        const platform = jid.slice(0, Math.max(0, jid.indexOf(':')));
        // Its own channel knows; else the name the platform's channel stored (it may run in another process).
        const own = this.opts.channels?.find((c) => c.platform === platform)?.identity?.username;
        return own ?? getState(db, botUsernameKey(platform));
      },
      access: this.access,
    };
  }

  /** One row of the batch; a row that throws ends failed, alone. */
  private row(
    msg: PolledRow,
    env: LayerEnv,
    now: number,
    out: BatchOutcome,
    touched: Set<string>,
    batch: BatchWork,
  ): void {
    const mark = {
      outbound: out.outbound,
      daemon: out.daemon,
      decided: out.decided,
      effects: out.effects.length,
    };
    const mine = new Set<string>();
    let root: Span | undefined;
    try {
      const bad = inboundRowError(msg as unknown as Record<string, unknown>);
      if (bad) throw new RowError(bad);
      root = startMessage(msg);
      this.opts.metrics?.messagesIn(parseJid(msg.chat_jid).platform, msg.verb);
      batch.beginRow(msg);
      // The sticky and command steps may write anything (answers, sessions, codes): a savepoint first.
      if (MAY_ACT.test(msg.content)) batch.guard();
      // Lines written on the row's way through the steps carry its trace (core/trace.ts).
      const end = inSpan(root, () => this.one(msg, env, now, mine, out, root, batch));
      endMessage(root, { id: msg.id, ...end }, Date.now());
      batch.rowDone();
      for (const chat of mine) touched.add(chat);
      if (msg.waits_files && end.group !== null) out.files = (out.files ?? 0) + 1;
    } catch (err) {
      batch.rowFailed();
      out.outbound = mark.outbound;
      out.daemon = mark.daemon;
      out.decided = mark.decided;
      out.effects.length = mark.effects;
      const error = coerceError(err).message;
      endMessage(root, { id: msg.id, step: null, group: null, held: false, error }, Date.now());
      inSpan(root, () => this.fail(msg, err));
    }
  }

  /**
   * One row through the steps, until one of them handles it. Returns, for its trace, the step that did,
   * the group the row was routed to (null: none) and whether it is held for that group's run.
   */
  private one(
    msg: Message,
    env: LayerEnv,
    now: number,
    touched: Set<string>,
    out: BatchOutcome,
    root: Span | undefined,
    batch: BatchWork,
  ): { step: string | null; group: string | null; held: boolean } {
    const row: RowWork = {
      passage: { msg, content: msg.content, group: undefined, topic: undefined },
      env,
      now,
      writes: this.writes,
      access: this.access,
      metrics: this.opts.metrics,
      configDir: this.opts.config.configDir,
      transcribe: this.opts.transcribe === true,
      out,
      touched,
      batch,
    };
    // Nothing to say: whitespace and no files never reach an agent, whatever wrote the row.
    if (msg.content.trim() === '' && this.writes.hasFiles.get(msg.id) === undefined) {
      this.writes.end.run({ id: msg.id, state: 'dropped', target: null, route_id: null, error: EMPTY });
      return { step: 'empty', group: null, held: false };
    }
    for (const step of STEPS) {
      if (step.applies && !step.applies(row)) continue;
      if (stepSpan(root, step.name, () => step.run(row)) !== 'handled') continue;
      return { step: step.name, group: row.decision?.folder ?? null, held: touched.size > 0 };
    }
    return { step: null, group: null, held: false };
  }

  /** Ends a row that could not be processed: state `failed` with its error, a metric and a log line. */
  private fail(msg: Message, err: unknown): void {
    const error = clipText(coerceError(err).message, 1000);
    this.opts.log.error(
      {
        msgId: msg.id,
        chat: typeof msg.chat_jid === 'string' ? clipText(msg.chat_jid, 200) : undefined,
        err: error,
      },
      'message failed; the rest of the batch goes on',
    );
    this.writes.end.run({ id: msg.id, state: 'failed', target: null, route_id: null, error });
    this.opts.metrics?.rowFailed?.('gateway');
  }
}

/** Content the sticky or command step may act on (`@name`, `#topic`, `/command`), after leading spaces. */
const MAY_ACT = /^\s*[@#/]/;

/** The error of a row dropped because it holds nothing for an agent. */
export const EMPTY = 'empty: only whitespace and no files';

/** A row whose columns cannot be processed. */
export class RowError extends Error {
  override readonly name = 'RowError';
}
