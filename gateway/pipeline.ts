import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Message } from '../core/types.js';
import { formatTarget, weightOf } from '../router/index.js';
import { expandChatCommand } from './layers/chat-commands.js';
import { commandLayer } from './layers/commands.js';
import { prefixLayer } from './layers/prefix.js';
import { chatGroupOf, routeLayer, type RoutingDecision } from './layers/route.js';
import { stickyLayer } from './layers/sticky.js';
import type { Draft, LayerEnv, QueueControl } from './layers/types.js';
import { ImpulseGate } from './impulse.js';
import { AccessGate } from './access.js';
import { AccessSource } from '../store/access.js';
import type { Db } from '../store/db.js';
import { inboundRowError, insertOutbound } from '../store/messages.js';
import { coerceError } from '../core/errors.js';
import { clipText } from '../core/text.js';
import type { RouteSource } from '../store/routes.js';
import { StickyStore } from '../store/state.js';
import type { GatewayMetrics } from './metrics-hooks.js';

/** What processing one poll batch changed, so the loop knows whom to wake after the commit. */
export interface BatchOutcome {
  released: number;
  outbound: number;
  daemon: number;
  effects: Array<() => void | Promise<void>>;
}

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
 * Pushes every message of a poll batch through the four layers in order (sticky → command → prefix →
 * routing) and then the impulse gate. Runs inside the batch transaction: every state change, answer row
 * and the cursor commit together, so a crash re-processes the whole batch and never half of it.
 */
export class Pipeline {
  readonly gate: ImpulseGate;
  /** The access decision (docs/ACCESS.md), between routing and the impulse gate. */
  readonly access: AccessGate;
  private readonly sticky: StickyStore;
  private readonly holdStmt;
  private readonly settleStmt;
  private readonly daemonStmt;
  private readonly hitStmt;

  constructor(private readonly opts: PipelineOptions) {
    const { db } = opts;
    this.gate = new ImpulseGate(db);
    this.access = new AccessGate(db, new AccessSource(db, opts.config.admins));
    this.sticky = new StickyStore(db);
    this.holdStmt = db.prepare(
      `UPDATE messages SET state = @state, group_folder = @group, session_topic = @topic, agent_content = @content,
         target = @target, route_id = @route_id, weight = @weight, threshold = @threshold,
         max_hold_ms = @max_hold_ms, held_at = @held_at, error = @error, interrupts = @interrupts
       WHERE id = @id`,
    );
    this.settleStmt = db.prepare(
      'UPDATE messages SET state = @state, target = @target, route_id = @route_id, error = @error WHERE id = @id',
    );
    this.daemonStmt = db.prepare(
      `UPDATE messages SET state = 'daemon', target = @target, route_id = @route_id, agent_content = @content WHERE id = @id`,
    );
    this.hitStmt = db.prepare(
      `INSERT INTO route_hits (route_id, hits, last_hit_at) VALUES (?, 1, ?)
       ON CONFLICT (route_id) DO UPDATE SET hits = hits + 1, last_hit_at = excluded.last_hit_at`,
    );
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
      settle: (msg, state, error) => {
        this.settleStmt.run({ id: msg.id, state, target: null, route_id: null, error: error ?? null });
      },
      afterCommit: (fn) => out.effects.push(fn),
      chatGroup: (draft) => chatGroupOf(draft, catalog.table),
      botName: (jid) => this.opts.botName?.(jid.slice(0, Math.max(0, jid.indexOf(':')))),
      access: this.access,
    };
    this.access.beginBatch();
    for (const msg of rows) {
      const mark = { outbound: out.outbound, daemon: out.daemon, effects: out.effects.length };
      const mine = new Set<string>();
      try {
        const bad = inboundRowError(msg as unknown as Record<string, unknown>);
        if (bad) throw new RowError(bad);
        this.opts.metrics?.messageIn(msg);
        this.db.transaction(() => this.one(msg, env, now, mine, out))();
        for (const chat of mine) touched.add(chat);
      } catch (err) {
        out.outbound = mark.outbound;
        out.daemon = mark.daemon;
        out.effects.length = mark.effects;
        this.fail(msg, err);
      }
    }
    this.access.endBatch();
    for (const chat of touched) {
      try {
        if (this.db.transaction(() => this.gate.settle(chat, now))()) out.released += 1;
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

  /** One row through the layers and its target. */
  private one(msg: Message, env: LayerEnv, now: number, touched: Set<string>, out: BatchOutcome): void {
    const draft: Draft = { msg, content: msg.content, group: undefined, topic: undefined };
    if (stickyLayer(draft, env) === 'handled') return;
    if (commandLayer(draft, env) === 'handled') return;
    prefixLayer(draft, env);
    const decision = routeLayer(draft, env);
    if (decision.routeId !== undefined) this.hitStmt.run(decision.routeId, new Date(now).toISOString());
    this.apply(draft, decision, env, now, touched, out);
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
    this.settleStmt.run({ id: msg.id, state: 'failed', target: null, route_id: null, error });
    this.opts.metrics?.rowFailed?.('gateway');
  }

  private apply(
    draft: Draft,
    decision: RoutingDecision,
    env: LayerEnv,
    now: number,
    touched: Set<string>,
    out: BatchOutcome,
  ): void {
    const { msg } = draft;
    const { target, routeId } = decision;
    const route_id = routeId ?? null;
    const metrics = this.opts.metrics;
    if (!target) {
      this.settleStmt.run({ id: msg.id, state: 'unrouted', target: null, route_id, error: null });
      metrics?.unrouted();
      return;
    }
    const targetText = formatTarget(target);
    metrics?.routed(targetText);
    switch (target.kind) {
      case 'folder': {
        if (!env.catalog.groups.has(target.folder)) {
          const error = `group '${target.folder}' is not registered`;
          this.opts.log.warn(
            { msgId: msg.id, chat: msg.chat_jid, group: target.folder },
            'message not dispatched: group not registered',
          );
          this.settleStmt.run({ id: msg.id, state: 'unrouted', target: targetText, route_id, error });
          return;
        }
        const impulse = decision.impulse;
        // A chat command from the group's files (not a gateway command: that layer already took those).
        const configDir = this.opts.config.configDir;
        if (configDir !== undefined && msg.verb === 'message' && draft.content.startsWith('/'))
          draft.content =
            expandChatCommand(configDir, target.folder, draft.content, this.opts.log) ?? draft.content;
        // Withheld rows keep their routing, so an approval or a release can put them in the gate as is.
        const verdict = this.access.decide(msg, target.folder, now);
        if (verdict.state !== 'serve' && verdict.notice) env.answer(msg, verdict.notice);
        this.holdStmt.run({
          id: msg.id,
          state: verdict.state === 'serve' ? 'held' : verdict.state,
          error: verdict.state === 'serve' ? null : verdict.reason,
          held_at: verdict.state === 'serve' ? now : null,
          group: target.folder,
          topic: draft.topic ?? msg.topic,
          // Only a changed text is kept apart; the stored content stays as the user wrote it.
          content: draft.content === msg.content ? null : draft.content,
          target: targetText,
          route_id,
          // An /interrupt is meant for now: it fills the gate at once.
          weight: draft.interrupts ? impulse.threshold : weightOf(impulse, msg.verb),
          interrupts: draft.interrupts ? 1 : null,
          threshold: impulse.threshold,
          max_hold_ms: impulse.maxHoldMs,
        });
        if (verdict.state === 'serve') touched.add(msg.chat_jid);
        return;
      }
      case 'builtin':
        if (target.name === 'ping') {
          env.answer(msg, 'pong');
          this.settleStmt.run({ id: msg.id, state: 'done', target: targetText, route_id, error: null });
        } else {
          this.settleStmt.run({ id: msg.id, state: 'dropped', target: targetText, route_id, error: null });
        }
        return;
      case 'daemon':
        this.daemonStmt.run({
          id: msg.id,
          target: targetText,
          route_id,
          content: draft.content === msg.content ? null : draft.content,
        });
        out.daemon += 1;
        return;
    }
  }
}

/** A row whose columns cannot be processed. */
export class RowError extends Error {
  override readonly name = 'RowError';
}
