import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Message, ThreadMode } from '../core/types.js';
import { chatGroupOf } from './layers/route.js';
import type { LayerEnv, QueueControl } from './layers/types.js';
import { STEPS, StepWrites, type BatchOutcome, type RowWork } from './steps.js';
import { ImpulseGate } from './impulse.js';
import { AccessGate } from './access.js';
import { AccessSource } from '../store/access.js';
import type { Db } from '../store/db.js';
import { inboundRowError, insertOutbound } from '../store/messages.js';
import { coerceError } from '../core/errors.js';
import { clipText } from '../core/text.js';
import type { RouteSource } from '../store/routes.js';
import { botUsernameKey, getState, StickyStore } from '../store/state.js';
import { threadModeReader } from '../store/groups.js';
import type { GatewayMetrics } from './metrics-hooks.js';
import { endMessage, startMessage, stepSpan } from '../core/trace.js';
import type { Span } from '@opentelemetry/api';

export type { BatchOutcome } from './steps.js';

/** Dependencies of the pipeline, injected once. */
export interface PipelineOptions {
  db: Db;
  config: Pick<Config, 'admins'> & Partial<Pick<Config, 'configDir'>>;
  log: Logger;
  routes: RouteSource;
  queue: QueueControl;
  metrics?: GatewayMetrics;
  /** This gateway's bot username on a platform (Telegram getMe), for `/cmd@bot` addressed elsewhere. */
  botName?: (platform: string) => string | undefined;
}

/**
 * Pushes every message of a poll batch through the steps in order (STEPS in steps.ts: sticky → command →
 * prefix → route → access → gate), then lets the impulse gate release the chats that got a held row. Runs
 * inside the batch transaction: every state change, answer row and the cursor commit together, so a crash
 * re-processes the whole batch and never half of it.
 */
export class Pipeline {
  readonly gate: ImpulseGate;
  /** The access decision (docs/ACCESS.md), between routing and the impulse gate. */
  readonly access: AccessGate;
  private readonly sticky: StickyStore;
  private readonly writes: StepWrites;
  private readonly threadMode: (folder: string) => ThreadMode;

  constructor(private readonly opts: PipelineOptions) {
    const { db } = opts;
    this.threadMode = threadModeReader(db);
    this.gate = new ImpulseGate(db);
    this.access = new AccessGate(db, new AccessSource(db, opts.config.admins));
    this.sticky = new StickyStore(db);
    this.writes = new StepWrites(db);
  }

  /**
   * Processes `rows` (call inside a transaction). Each row runs in its own savepoint: a row that throws
   * (a wrong-typed column, a layer's bug) is rolled back alone, ends `failed` with its error, and the rows
   * after it are processed as usual.
   */
  process(rows: readonly Message[], now: number): BatchOutcome {
    const { db, log } = this.opts;
    const out: BatchOutcome = { released: 0, outbound: 0, daemon: 0, effects: [] };
    const catalog = this.opts.routes.current();
    const touched = new Set<string>();
    const env: LayerEnv = {
      db,
      config: this.opts.config,
      log,
      catalog,
      sticky: this.sticky,
      queue: this.opts.queue,
      now,
      answer: (msg, text) => {
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
        this.writes.end.run({ id: msg.id, state, target: null, route_id: null, error: error ?? null });
      },
      afterCommit: (fn) => out.effects.push(fn),
      chatGroup: (passage) => chatGroupOf(passage, catalog.table),
      sessionTopic: (passage, group) =>
        passage.topic ?? (this.threadMode(group) === 'replies' ? '' : passage.msg.topic),
      botName: (jid) => {
        const platform = jid.slice(0, Math.max(0, jid.indexOf(':')));
        // Its own channel knows; else the name the platform's channel stored (it may run in another process).
        return this.opts.botName?.(platform) ?? getState(db, botUsernameKey(platform));
      },
      access: this.access,
    };
    this.access.beginBatch();
    for (const msg of rows) {
      const mark = { outbound: out.outbound, daemon: out.daemon, effects: out.effects.length };
      const mine = new Set<string>();
      let root: Span | undefined;
      try {
        const bad = inboundRowError(msg as unknown as Record<string, unknown>);
        if (bad) throw new RowError(bad);
        root = startMessage(msg);
        this.opts.metrics?.messageIn(msg);
        const end = this.db.transaction(() => this.one(msg, env, now, mine, out, root))();
        endMessage(root, { id: msg.id, ...end }, Date.now());
        for (const chat of mine) touched.add(chat);
      } catch (err) {
        out.outbound = mark.outbound;
        out.daemon = mark.daemon;
        out.effects.length = mark.effects;
        const error = coerceError(err).message;
        endMessage(root, { id: msg.id, step: null, group: null, held: false, error }, Date.now());
        this.fail(msg, err);
      }
    }
    this.access.endBatch();
    for (const chat of touched) {
      try {
        if (this.db.transaction(() => this.gate.weigh(chat, now))()) out.released += 1;
      } catch (err) {
        // The chat's rows stay held; the next tick or the maximum hold releases them.
        log.error(
          { chat: clipText(chat, 200), err: coerceError(err).message },
          'impulse gate failed for a chat',
        );
      }
    }
    return out;
  }

  private get db() {
    return this.opts.db;
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
  ): { step: string | null; group: string | null; held: boolean } {
    const row: RowWork = {
      passage: { msg, content: msg.content, group: undefined, topic: undefined },
      env,
      now,
      writes: this.writes,
      access: this.access,
      metrics: this.opts.metrics,
      configDir: this.opts.config.configDir,
      out,
      touched,
    };
    // Nothing to say: whitespace and no files never reach an agent, whatever wrote the row.
    if (msg.content.trim() === '' && this.writes.hasFiles.get(msg.id) === undefined) {
      this.writes.end.run({ id: msg.id, state: 'dropped', target: null, route_id: null, error: EMPTY });
      return { step: 'empty', group: null, held: false };
    }
    for (const step of STEPS) {
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

/** The error of a row dropped because it holds nothing for an agent. */
export const EMPTY = 'empty: only whitespace and no files';

/** A row whose columns cannot be processed. */
export class RowError extends Error {
  override readonly name = 'RowError';
}
