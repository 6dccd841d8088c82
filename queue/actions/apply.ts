import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { platformRow } from '../../core/platforms.js';
import { parseJid } from '../../core/types.js';
import { ActionStore, DELEGATION_PLATFORM, delegationOf } from '../../store/actions.js';
import { withActor } from '../../store/audit.js';
import type { Db } from '../../store/db.js';
import { DEFAULT_MEMORY_BOUNDS, MemoryRefused, MemoryStore, type MemoryBounds } from '../../store/memory.js';
import { insertOutbound } from '../../store/messages.js';
import { RouteSource } from '../../store/routes.js';
import { addTask, type TaskBounds } from '../../store/tasks.js';
import { DEFAULT_CHAIN_BOUNDS, DelegationChains } from './chain.js';
import { forgetRefusal, rememberScope, type TurnSender } from './memory.js';
import {
  parseActions,
  type Action,
  type ActionType,
  type DelegateAction,
  type EscalateAction,
  type ForgetAction,
  type ReactAction,
  type RememberAction,
  type ScheduleAction,
  type SendAction,
} from './parse.js';
import { capabilitiesOf, delegationTarget, parentOf, sendRefusal } from './policy.js';

/** The run a block belongs to, as the actions see it. */
export interface ActionContext {
  runId: number;
  group: string;
  topic: string;
  /** The chat the run answers. */
  chatJid: string;
  /** The newest message the block's turn answers: what `react` reacts to. */
  answering: { id: number; chat_jid: string; platform_msg_id: string | null; topic: string } | null;
  /** Every row of the turns the block answers (default: `answering` alone): a delegation chain in them goes on. */
  turnRows?: readonly number[];
  /** The turn the block answers (its provenance for `remember`). */
  turn?: number;
  /** The senders of the turns the block answers, with their roles: whose memory `remember` writes. */
  senders?: readonly TurnSender[];
  now: number;
}

/** What applying a block's actions did, so the caller knows whom to wake after the commit. */
export interface ActionsOutcome {
  applied: number;
  refused: number;
  /** Outbound rows written (send, react): delivery should look. */
  outbound: number[];
  /** Inbound rows placed in a session (delegate, escalate): the queue should look. */
  placed: number;
  /** Tasks added (schedule): the task worker should look. */
  scheduled: number;
  /** Facts remembered or forgotten. */
  memory: number;
}

/** What the applier counts (core/metrics.ts). */
export interface ActionMetrics {
  action(type: string, outcome: 'applied' | 'refused' | 'ignored'): void;
}

/** How the applier is built; only gated/ and the queue construct it. */
export interface ActionApplierOptions {
  db: Db;
  log: Logger;
  /** GATED_TZ: cron tasks of `schedule`. */
  tz: string;
  /** Deepest delegation chain (GATED_MAX_DELEGATION_DEPTH); a deeper delegation is refused. */
  maxDepth: number;
  /** Most hops of a delegation chain per originating message (GATED_MAX_DELEGATION_HOPS). Default 20. */
  maxHops?: number;
  /** Bounds on agents' `schedule` (GATED_TASK_MIN_INTERVAL_MS, GATED_TASKS_PER_GROUP). */
  taskBounds?: TaskBounds;
  /** Bounds on a group's memory (GATED_MEMORY_MAX_FACTS, GATED_MEMORY_MAX_FACT_BYTES). */
  memoryBounds?: MemoryBounds;
  metrics?: ActionMetrics;
}

/** docs/SECURITY.md's defaults: a task fires at most once a minute; a group has at most 50 active tasks. */
export const DEFAULT_TASK_BOUNDS: TaskBounds = { minIntervalMs: 60_000, maxActive: 50 };

/** An action refused for a reason the agent should hear about. */
class Refusal extends Error {}

/**
 * Applies the actions of output blocks (docs/PROTOCOL.md), inside the transaction that stores the block:
 * every action is first a row of `actions`, then its effect (an outbound row, a placed inbound row, a
 * task), so a crash neither loses nor repeats it. A refused or malformed action is logged with its reason,
 * counted, and becomes one note (system_messages) for the session's next line.
 */
export class ActionApplier {
  private readonly store: ActionStore;
  private readonly routes: RouteSource;
  private readonly chains: DelegationChains;
  private readonly memory: MemoryStore;

  constructor(private readonly opts: ActionApplierOptions) {
    this.store = new ActionStore(opts.db);
    this.memory = new MemoryStore(opts.db, opts.memoryBounds ?? DEFAULT_MEMORY_BOUNDS);
    this.routes = new RouteSource(opts.db);
    this.chains = new DelegationChains(opts.db, {
      maxDepth: opts.maxDepth,
      maxHops: opts.maxHops ?? DEFAULT_CHAIN_BOUNDS.maxHops,
    });
  }

  /** The action types `group` may use, for the agent's input (`capabilities`). */
  capabilities(group: string): ActionType[] {
    const settings = this.store.settings(group);
    if (!settings) return [];
    return capabilitiesOf(group, settings.actions, this.store.tree());
  }

  /** True for the chat of a delegation (`delegation:<id>`), whose answers go back to the delegator. */
  isDelegationChat(chatJid: string): boolean {
    return delegationOf(chatJid) !== null;
  }

  /** A partial block's actions are not applied; they are logged and counted. */
  ignorePartial(ctx: Pick<ActionContext, 'runId'>, raw: unknown): void {
    const n = Array.isArray(raw) ? raw.length : raw === undefined || raw === null ? 0 : 1;
    if (n === 0) return;
    this.opts.metrics?.action('partial', 'ignored');
    this.opts.log.warn({ runId: ctx.runId, actions: n }, 'actions of a partial block ignored');
  }

  /** Applies a block's `actions` value. Call inside the block's transaction; never throws for bad input. */
  apply(ctx: ActionContext, raw: unknown): ActionsOutcome {
    const out: ActionsOutcome = { applied: 0, refused: 0, outbound: [], placed: 0, scheduled: 0, memory: 0 };
    const parsed = parseActions(raw);
    if (parsed.length === 0) return out;
    const allowed = new Set(this.capabilities(ctx.group));
    parsed.forEach((p, i) => {
      const payload = clip(JSON.stringify(Array.isArray(raw) ? raw[i] : raw) ?? 'null');
      const type = p.ok ? p.action.type : p.type;
      const refuse = (reason: string) => {
        this.store.log(
          {
            run_id: ctx.runId,
            group: ctx.group,
            topic: ctx.topic,
            chat_jid: ctx.chatJid,
            type,
            payload,
            status: 'refused',
            reason,
          },
          ctx.now,
        );
        this.store.note(ctx.group, ctx.topic, `Your ${type} action was not applied: ${reason}.`, ctx.now);
        this.opts.metrics?.action(type, 'refused');
        this.opts.log.warn({ runId: ctx.runId, group: ctx.group, type, reason }, 'action refused');
        out.refused += 1;
      };
      if (!p.ok) return refuse(`malformed: ${p.reason}`);
      if (!allowed.has(p.action.type))
        return refuse(`'${p.action.type}' is not allowed for group '${ctx.group}'`);
      try {
        // A savepoint per action: a refusal found halfway undoes that action's rows, not the block's.
        this.opts.db.transaction(() => {
          const id = this.store.log(
            {
              run_id: ctx.runId,
              group: ctx.group,
              topic: ctx.topic,
              chat_jid: ctx.chatJid,
              type,
              payload,
              status: 'applied',
              reason: null,
            },
            ctx.now,
          );
          this.effect(ctx, p.action, id, out);
        })();
      } catch (err) {
        if (err instanceof Refusal) return refuse(err.message);
        return refuse(`failed: ${coerceError(err).message}`);
      }
      out.applied += 1;
      this.opts.metrics?.action(type, 'applied');
      this.opts.log.info({ runId: ctx.runId, group: ctx.group, type }, 'action applied');
    });
    return out;
  }

  /**
   * A block's answer in a delegated run (its chat is `delegation:<id>`) goes back to the delegating session
   * instead of a platform: ready for it, or kept `limited` when the chain made its hops or the session's
   * group reached a daily limit (the answering session is told why). Returns the placed row's id, or null
   * when the chat is not a delegation's or the answer is only whitespace.
   */
  answerDelegation(
    ctx: Pick<ActionContext, 'group' | 'topic' | 'chatJid' | 'now'>,
    text: string,
  ): number | null {
    const id = delegationOf(ctx.chatJid);
    const d = id === null ? undefined : this.store.delegation(id);
    if (!d || text.trim() === '') return null;
    const withheld = this.chains.answerWithheld(d, ctx.now);
    if (withheld !== null) {
      this.store.note(
        ctx.group,
        ctx.topic,
        `Your answer to delegation ${d.id} was kept but not passed on to ${d.from_group}: ${withheld}.`,
        ctx.now,
      );
      this.opts.log.warn(
        { group: ctx.group, delegation: d.id, reason: withheld },
        'delegation answer withheld',
      );
    }
    return this.store.returnAnswer(d, ctx.group, text, ctx.now, withheld);
  }

  private effect(ctx: ActionContext, a: Action, actionId: number, out: ActionsOutcome): void {
    switch (a.type) {
      case 'send':
        return this.send(ctx, a, actionId, out);
      case 'delegate':
      case 'escalate':
        return this.delegate(ctx, a, actionId, out);
      case 'schedule':
        return this.schedule(ctx, a, actionId, out);
      case 'react':
        return this.react(ctx, a, actionId, out);
      case 'remember':
        return withActor(this.opts.db, `agent:${ctx.group}`, () => this.remember(ctx, a, out));
      case 'forget':
        return withActor(this.opts.db, `agent:${ctx.group}`, () => this.forget(ctx, a, out));
    }
  }

  /** `remember`: a fact of the group, or of the turn's stranger (docs/MEMORY.md), with its provenance. */
  private remember(ctx: ActionContext, a: RememberAction, out: ActionsOutcome): void {
    const senders = ctx.senders ?? [];
    const scope = rememberScope(a.scope, senders);
    if (typeof scope !== 'string') throw new Refusal(scope.refused);
    try {
      this.memory.remember({
        group: ctx.group,
        scope,
        text: a.text,
        provenance: {
          run: ctx.runId,
          ...(ctx.turn !== undefined ? { turn: ctx.turn } : {}),
          chat: ctx.chatJid,
          senders: senders.map((s) => ({ sender: s.sender, role: s.role })),
        },
        actor: `agent:${ctx.group}`,
      });
    } catch (err) {
      if (err instanceof MemoryRefused) throw new Refusal(err.message);
      throw err;
    }
    out.memory += 1;
  }

  /** `forget`: one fact the turn may delete. */
  private forget(ctx: ActionContext, a: ForgetAction, out: ActionsOutcome): void {
    const why = forgetRefusal(this.memory.get(a.id), ctx.group, ctx.senders ?? []);
    if (why !== null) throw new Refusal(why);
    this.memory.forget(a.id);
    out.memory += 1;
  }

  /** `send`: an outbound row to a chat the group may reach. */
  private send(ctx: ActionContext, a: SendAction, actionId: number, out: ActionsOutcome): void {
    if (parseJid(a.chat_jid).platform === DELEGATION_PLATFORM)
      throw new Refusal(`'${a.chat_jid}' is not a chat (answer the delegation instead)`);
    const why = sendRefusal(a.chat_jid, {
      group: ctx.group,
      runChat: ctx.chatJid,
      routes: this.routes.current().table,
      store: this.store,
      sendAllow: this.store.settings(ctx.group)?.send_allow ?? null,
    });
    if (why) throw new Refusal(why);
    const id = insertOutbound(this.opts.db, { chat_jid: a.chat_jid, content: a.text, kind: 'send' });
    this.store.linkMessage(actionId, id);
    out.outbound.push(id);
  }

  /** `delegate` (to a group below) or `escalate` (to the group above): a row in that group's session. */
  private delegate(
    ctx: ActionContext,
    a: DelegateAction | EscalateAction,
    actionId: number,
    out: ActionsOutcome,
  ): void {
    const groups = this.store.tree();
    let to: string;
    if (a.type === 'delegate') {
      const t = delegationTarget(a.group, ctx.group, groups);
      if (typeof t !== 'string') throw new Refusal(t.refused);
      to = t;
    } else {
      const up = parentOf(ctx.group, groups);
      if (up === undefined) throw new Refusal(`no registered group above '${ctx.group}'`);
      to = up;
    }
    const place = this.chains.place(ctx);
    if ('refused' in place) throw new Refusal(place.refused);
    const why = this.chains.refusal(place, to, ctx.now);
    if (why !== null) throw new Refusal(why);
    const made = this.store.delegate(
      {
        action_id: actionId,
        kind: a.type,
        from_group: ctx.group,
        from_topic: ctx.topic,
        from_chat: ctx.chatJid,
        from_thread: ctx.answering?.topic ?? '',
        to_group: to,
        depth: place.depth,
        origin: place.origin,
      },
      a.text,
      ctx.now,
    );
    this.store.linkMessage(actionId, made.message);
    out.placed += 1;
  }

  /** `schedule`: a task of the group, within the bounds an agent's tasks have. */
  private schedule(ctx: ActionContext, a: ScheduleAction, actionId: number, out: ActionsOutcome): void {
    let task: number;
    try {
      task = addTask(
        this.opts.db,
        {
          group: ctx.group,
          topic: a.topic ?? ctx.topic,
          chat_jid: ctx.chatJid,
          kind: a.kind,
          spec: a.spec,
          text: a.text,
          created_by: `agent:${ctx.group}`,
          bounds: this.opts.taskBounds ?? DEFAULT_TASK_BOUNDS,
        },
        ctx.now,
        this.opts.tz,
      );
    } catch (err) {
      throw new Refusal(coerceError(err).message);
    }
    this.store.linkTask(actionId, task);
    out.scheduled += 1;
  }

  /** `react`: a reaction row on the message the block answers, where its platform's row has reactions. */
  private react(ctx: ActionContext, a: ReactAction, actionId: number, out: ActionsOutcome): void {
    const to = ctx.answering;
    if (!to) throw new Refusal('there is no message to react to');
    const platform = parseJid(to.chat_jid).platform;
    if (!platformRow(platform)?.reactions) throw new Refusal(`${platform || 'this'} chats have no reactions`);
    if (to.platform_msg_id === null) throw new Refusal('the message has no platform id to react to');
    const id = insertOutbound(this.opts.db, {
      chat_jid: to.chat_jid,
      content: a.emoji,
      kind: 'reaction',
      reply_to: to.platform_msg_id,
      reply_to_id: to.id,
      topic: to.topic,
    });
    this.store.linkMessage(actionId, id);
    out.outbound.push(id);
  }
}

/** The action as logged: whole unless it is huge. */
function clip(json: string): string {
  return json.length > 4096 ? json.slice(0, 4095) + '…' : json;
}
