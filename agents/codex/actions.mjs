// gated's actions (docs/PROTOCOL.md, "Actions") as MCP tools for the Codex CLI: one tool per action type the
// run's `capabilities` allow, offered by the bridge (bridge.mjs) as the server `gated`, so the model sees
// `mcp__gated__send`, `mcp__gated__schedule`, …, as under the Claude agent (agents/claude/actions.mjs, which
// holds the same tools as zod shapes for the Claude SDK). A call applies nothing: it records the action for
// the turn in progress, and the turn's final block carries what was recorded, so gated applies them in the
// transaction that stores the answer. gated checks every action again; the checks here only spare the model
// a round trip for what gated would refuse as malformed anyway.

/** The server name the actions are offered under. */
export const SERVER = 'gated';

const TEXT = { type: 'string', minLength: 1, maxLength: 65536 };

function str(v, max = 65536) {
  return typeof v === 'string' && v.length > 0 && v.length <= max;
}

// One entry per action type: the tool's description, its JSON Schema, a check and how a call becomes an
// action.
const ACTIONS = {
  send: {
    description:
      'Send a message to another chat (besides answering this one). Allowed targets: chats whose ' +
      'messages reach this group or one below it, and chats the operator allowed.',
    properties: {
      chat_jid: { type: 'string', description: 'the chat, e.g. telegram:-100123' },
      text: { ...TEXT, description: 'the message, in Markdown' },
    },
    required: ['chat_jid', 'text'],
    check: (a) =>
      typeof a.chat_jid === 'string' && /^[a-z][a-z0-9_-]{0,31}:\S{1,256}$/.test(a.chat_jid)
        ? null
        : 'chat_jid must look like platform:room',
    action: (a) => ({ type: 'send', chat_jid: a.chat_jid, text: a.text }),
    summary: (a) => `a message to ${a.chat_jid}`,
  },
  delegate: {
    description: 'Hand work to a group below this one; its answer comes back to you as a later message.',
    properties: {
      group: { type: 'string', minLength: 1, description: 'the group (child name, or folder path)' },
      text: { ...TEXT, description: 'what the group should do' },
    },
    required: ['group', 'text'],
    check: (a) => (str(a.group, 256) ? null : 'group must be a group name'),
    action: (a) => ({ type: 'delegate', group: a.group, text: a.text }),
    summary: (a) => `work for ${a.group}`,
  },
  escalate: {
    description: 'Hand a question or decision to the group above this one; its answer comes back to you.',
    properties: { text: { ...TEXT, description: 'what the group above should decide or do' } },
    required: ['text'],
    action: (a) => ({ type: 'escalate', text: a.text }),
    summary: () => 'an escalation',
  },
  schedule: {
    description:
      'Schedule a task: at each due time, the text arrives in this chat as a message from the system. ' +
      'Give exactly one of cron (5 fields), every (e.g. 15m, 2h, 1d) or at (ISO time, once).',
    properties: {
      cron: { type: 'string', description: 'a 5-field cron expression, e.g. "0 9 * * 1"' },
      every: { type: 'string', description: 'an interval such as 15m or 2h' },
      at: { type: 'string', description: 'an ISO 8601 time, once' },
      text: { ...TEXT, description: 'what to do each time' },
      topic: { type: 'string', description: 'the topic the task runs in (default: this one)' },
    },
    required: ['text'],
    check: (a) =>
      ['cron', 'every', 'at'].filter((k) => typeof a[k] === 'string').length === 1
        ? null
        : 'give exactly one of cron, every, at',
    action: (a) => {
      const kind = ['cron', 'every', 'at'].find((k) => typeof a[k] === 'string');
      return {
        type: 'schedule',
        [kind]: a[kind],
        text: a.text,
        ...(typeof a.topic === 'string' ? { topic: a.topic } : {}),
      };
    },
    summary: (a) => `a task (${a.cron ?? a.every ?? a.at})`,
  },
  react: {
    description: 'React with an emoji on the message you are answering (where the platform has reactions).',
    properties: { emoji: { type: 'string', minLength: 1, maxLength: 32, description: 'one emoji, e.g. 👍' } },
    required: ['emoji'],
    check: (a) => (str(a.emoji, 32) ? null : 'emoji must be one emoji'),
    action: (a) => ({ type: 'react', emoji: a.emoji }),
    summary: (a) => `the reaction ${a.emoji}`,
  },
  remember: {
    description:
      'Remember a fact beyond this session (the group keeps it; later turns that mention it are given it). ' +
      'scope "sender": about the one person you are answering only. What a stranger tells you is kept as ' +
      "that stranger's, whatever the scope.",
    properties: {
      text: {
        type: 'string',
        minLength: 1,
        maxLength: 2048,
        description: 'the fact, in one or two sentences',
      },
      scope: { type: 'string', enum: ['group', 'sender'], description: 'group (default) or sender' },
    },
    required: ['text'],
    check: (a) =>
      a.scope === undefined || a.scope === 'group' || a.scope === 'sender'
        ? null
        : 'scope must be group or sender',
    action: (a) => ({ type: 'remember', text: a.text, ...(a.scope ? { scope: a.scope } : {}) }),
    summary: () => 'a fact to remember',
  },
  forget: {
    description: 'Forget a remembered fact by its id (a <memory id=…> of the prompt).',
    properties: { id: { type: 'integer', minimum: 1, description: 'the fact id' } },
    required: ['id'],
    check: (a) => (Number.isSafeInteger(a.id) && a.id > 0 ? null : 'id must be a fact id'),
    action: (a) => ({ type: 'forget', id: a.id }),
    summary: (a) => `forgetting fact #${a.id}`,
  },
};

/** The action types this agent knows, out of `capabilities` (unknown names are skipped). */
export function offered(capabilities) {
  return Array.isArray(capabilities) ? capabilities.filter((c) => Object.hasOwn(ACTIONS, c)) : [];
}

/** The MCP tool list (name, description, input schema) of `types`. */
export function actionTools(types) {
  return types.map((type) => ({
    name: type,
    description: ACTIONS[type].description,
    inputSchema: {
      type: 'object',
      properties: ACTIONS[type].properties,
      required: ACTIONS[type].required,
      additionalProperties: false,
    },
  }));
}

/**
 * A call of action tool `type` with `args`: the action and its summary, or why it is malformed. Text
 * fields are checked here for every type (a tool's schema is a hint the model may not follow).
 */
export function actionCall(type, args) {
  const a = ACTIONS[type];
  if (!a) return { refused: `no action ${type}` };
  const input = typeof args === 'object' && args !== null ? args : {};
  if (a.required.includes('text') && !str(input.text)) return { refused: 'text must be a non-empty string' };
  const why = a.check?.(input);
  if (why) return { refused: why };
  return { action: a.action(input), summary: a.summary(input) };
}
