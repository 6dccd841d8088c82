import { parseJid, PLATFORM_RE } from '../../core/types.js';
import type { TaskKind } from '../../core/schedule.js';

/**
 * The actions an output block may carry (docs/PROTOCOL.md), and the parser that turns what an agent wrote
 * into them. Pure: deciding whether an action is allowed and applying it is policy.ts and apply.ts.
 */

/** The action type names, as `capabilities` lists them. */
export const ACTION_TYPES = [
  'send',
  'delegate',
  'escalate',
  'schedule',
  'react',
  'remember',
  'forget',
] as const;
/** One action type name. */
export type ActionType = (typeof ACTION_TYPES)[number];

/** An outbound message to another chat. */
export interface SendAction {
  type: 'send';
  chat_jid: string;
  text: string;
}
/** Work for a group below this one. */
export interface DelegateAction {
  type: 'delegate';
  group: string;
  text: string;
}
/** Work for the nearest registered group above this one. */
export interface EscalateAction {
  type: 'escalate';
  text: string;
}
/** A task for this group. */
export interface ScheduleAction {
  type: 'schedule';
  kind: TaskKind;
  spec: string;
  text: string;
  topic: string | undefined;
}
/** A reaction on the message the turn answers. */
export interface ReactAction {
  type: 'react';
  emoji: string;
}
/** A fact to keep beyond the session (docs/MEMORY.md): the group's, or only the sender's. */
export interface RememberAction {
  type: 'remember';
  text: string;
  /** `sender`: about the turn's one sender only. Absent: the group's (a stranger's turn: the stranger's). */
  scope: 'group' | 'sender' | undefined;
}
/** A fact to delete, by its id. */
export interface ForgetAction {
  type: 'forget';
  id: number;
}
/** Any well-formed action. */
export type Action =
  SendAction | DelegateAction | EscalateAction | ScheduleAction | ReactAction | RememberAction | ForgetAction;

/** An action as parsed: well-formed, or the reason it is not (with the type it claimed, if any). */
export type Parsed = { ok: true; action: Action } | { ok: false; type: string; reason: string };

/** Most actions one block may carry; the rest are refused. */
export const MAX_ACTIONS_PER_BLOCK = 20;
/** Longest text an action may carry (send, delegate, escalate, schedule). */
export const MAX_ACTION_TEXT = 64 * 1024;

/** A chat an agent may name: a platform, then a room of 1 to 256 characters without white space. */
function isChatJid(jid: string): boolean {
  const { platform, room } = parseJid(jid);
  return PLATFORM_RE.test(platform) && /^\S{1,256}$/.test(room);
}

function isActionType(t: string): t is ActionType {
  return (ACTION_TYPES as readonly string[]).includes(t);
}

/** Parses one entry of a block's `actions` array. Never throws. */
export function parseAction(raw: unknown): Parsed {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return { ok: false, type: '?', reason: 'an action must be a JSON object' };
  const v = raw as Record<string, unknown>;
  if (typeof v.type !== 'string') return { ok: false, type: '?', reason: 'an action needs a string "type"' };
  const type = v.type.slice(0, 32);
  if (!isActionType(type))
    return { ok: false, type, reason: `unknown action type '${type}' (known: ${ACTION_TYPES.join(', ')})` };
  const bad = (reason: string): Parsed => ({ ok: false, type, reason });
  const text = (key: string): string | Parsed => {
    const t = v[key];
    if (typeof t !== 'string' || t.trim() === '') return bad(`"${key}" must be a non-empty string`);
    if (t.length > MAX_ACTION_TEXT) return bad(`"${key}" is longer than ${MAX_ACTION_TEXT} characters`);
    return t;
  };
  switch (type) {
    case 'send': {
      const t = text('text');
      if (typeof t !== 'string') return t;
      if (typeof v.chat_jid !== 'string' || !isChatJid(v.chat_jid))
        return bad('"chat_jid" must be a chat JID such as telegram:-100123');
      return { ok: true, action: { type, chat_jid: v.chat_jid, text: t } };
    }
    case 'delegate': {
      const t = text('text');
      if (typeof t !== 'string') return t;
      if (typeof v.group !== 'string' || v.group === '') return bad('"group" must name a group');
      return { ok: true, action: { type, group: v.group.replace(/^@/, ''), text: t } };
    }
    case 'escalate': {
      const t = text('text');
      return typeof t === 'string' ? { ok: true, action: { type, text: t } } : t;
    }
    case 'schedule': {
      const t = text('text');
      if (typeof t !== 'string') return t;
      const kinds = (['cron', 'every', 'at'] as const).filter((k) => v[k] !== undefined);
      if (kinds.length !== 1) return bad('a schedule needs exactly one of "cron", "every", "at"');
      const kind = kinds[0]!;
      if (typeof v[kind] !== 'string') return bad(`"${kind}" must be a string`);
      if (v.topic !== undefined && typeof v.topic !== 'string') return bad('"topic" must be a string');
      const topic = typeof v.topic === 'string' ? v.topic.replace(/^#/, '') : undefined;
      return { ok: true, action: { type, kind, spec: v[kind] as string, text: t, topic } };
    }
    case 'react': {
      if (typeof v.emoji !== 'string' || v.emoji.trim() === '' || v.emoji.length > 32)
        return bad('"emoji" must be a short non-empty string');
      return { ok: true, action: { type, emoji: v.emoji.trim() } };
    }
    case 'remember': {
      const t = text('text');
      if (typeof t !== 'string') return t;
      if (v.scope !== undefined && v.scope !== 'group' && v.scope !== 'sender')
        return bad('"scope" must be "group" or "sender"');
      return { ok: true, action: { type, text: t, scope: v.scope } };
    }
    case 'forget': {
      if (typeof v.id !== 'number' || !Number.isSafeInteger(v.id) || v.id < 1)
        return bad('"id" must be the positive integer id of a fact');
      return { ok: true, action: { type, id: v.id } };
    }
  }
}

/**
 * Parses a block's `actions` value: absent is no actions; anything but an array is one malformed action;
 * entries beyond MAX_ACTIONS_PER_BLOCK are refused.
 */
export function parseActions(raw: unknown): Parsed[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) return [{ ok: false, type: '?', reason: '"actions" must be an array' }];
  return raw.map((a, i) =>
    i < MAX_ACTIONS_PER_BLOCK
      ? parseAction(a)
      : {
          ok: false as const,
          type:
            typeof (a as { type?: unknown })?.type === 'string'
              ? String((a as { type: string }).type).slice(0, 32)
              : '?',
          reason: `more than ${MAX_ACTIONS_PER_BLOCK} actions in one block`,
        },
  );
}
