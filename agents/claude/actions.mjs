// gated's actions (docs/PROTOCOL.md, "Actions") as tools the model can call: an in-process MCP server of the
// Claude Agent SDK with one tool per action type the run's `capabilities` allow. A call applies nothing: it
// records the action for the turn in progress, and the turn's final block carries what was recorded, so
// gated applies them in the transaction that stores the answer (a crash before that loses nothing and
// repeats nothing: the retried turn asks again). gated checks every action again; the schemas here only
// spare the model a round trip for what gated would refuse as malformed anyway.
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';

/** The MCP server's name; its tools reach the model as `mcp__gated__<action>`. */
export const SERVER = 'gated';

const text = z.string().min(1).max(65536);

function done(summary) {
  return {
    content: [{ type: 'text', text: `Recorded: ${summary}. It will be applied when this answer is stored.` }],
  };
}

function refused(reason) {
  return { content: [{ type: 'text', text: `Not recorded: ${reason}` }], isError: true };
}

// One entry per action type: the tool's description, its input shape and how a call becomes an action.
const ACTIONS = {
  send: {
    description:
      'Send a message to another chat (besides answering this one). Allowed targets: chats whose ' +
      'messages reach this group or one below it, and chats the operator allowed.',
    shape: {
      chat_jid: z
        .string()
        .regex(/^[a-z][a-z0-9_-]{0,31}:\S{1,256}$/)
        .describe('the chat, e.g. telegram:-100123'),
      text: text.describe('the message, in Markdown'),
    },
    action: (a) => ({ type: 'send', chat_jid: a.chat_jid, text: a.text }),
    summary: (a) => `a message to ${a.chat_jid}`,
  },
  delegate: {
    description: 'Hand work to a group below this one; its answer comes back to you as a later message.',
    shape: {
      group: z.string().min(1).describe('the group (child name, or folder path)'),
      text: text.describe('what the group should do'),
    },
    action: (a) => ({ type: 'delegate', group: a.group, text: a.text }),
    summary: (a) => `work for ${a.group}`,
  },
  escalate: {
    description: 'Hand a question or decision to the group above this one; its answer comes back to you.',
    shape: { text: text.describe('what the group above should decide or do') },
    action: (a) => ({ type: 'escalate', text: a.text }),
    summary: () => 'an escalation',
  },
  schedule: {
    description:
      'Schedule a task: at each due time, the text arrives in this chat as a message from the system. ' +
      'Give exactly one of cron (5 fields), every (e.g. 15m, 2h, 1d) or at (ISO time, once).',
    shape: {
      cron: z.string().optional().describe('a 5-field cron expression, e.g. "0 9 * * 1"'),
      every: z.string().optional().describe('an interval such as 15m or 2h'),
      at: z.string().optional().describe('an ISO 8601 time, once'),
      text: text.describe('what to do each time'),
      topic: z.string().optional().describe('the topic the task runs in (default: this one)'),
    },
    check: (a) =>
      ['cron', 'every', 'at'].filter((k) => a[k] !== undefined).length === 1
        ? null
        : 'give exactly one of cron, every, at',
    action: (a) => {
      const kind = ['cron', 'every', 'at'].find((k) => a[k] !== undefined);
      return {
        type: 'schedule',
        [kind]: a[kind],
        text: a.text,
        ...(a.topic !== undefined ? { topic: a.topic } : {}),
      };
    },
    summary: (a) => `a task (${a.cron ?? a.every ?? a.at})`,
  },
  react: {
    description: 'React with an emoji on the message you are answering (where the platform has reactions).',
    shape: { emoji: z.string().min(1).max(32).describe('one emoji, e.g. 👍') },
    action: (a) => ({ type: 'react', emoji: a.emoji }),
    summary: (a) => `the reaction ${a.emoji}`,
  },
  remember: {
    description:
      'Remember a fact beyond this session (the group keeps it; later turns that mention it are given it). ' +
      'scope "sender": about the one person you are answering only. What a stranger tells you is kept as ' +
      "that stranger's, whatever the scope.",
    shape: {
      text: z.string().min(1).max(2048).describe('the fact, in one or two sentences'),
      scope: z.enum(['group', 'sender']).optional().describe('group (default) or sender'),
    },
    action: (a) => ({ type: 'remember', text: a.text, ...(a.scope ? { scope: a.scope } : {}) }),
    summary: () => 'a fact to remember',
  },
  forget: {
    description: 'Forget a remembered fact by its id (from recall, or a <memory id=…> of the prompt).',
    shape: { id: z.number().int().min(1).describe('the fact id') },
    action: (a) => ({ type: 'forget', id: a.id }),
    summary: (a) => `forgetting fact #${a.id}`,
  },
};

/** The action types this agent knows, out of `capabilities` (unknown names are skipped). */
export function offered(capabilities) {
  return Array.isArray(capabilities) ? capabilities.filter((c) => Object.hasOwn(ACTIONS, c)) : [];
}

/**
 * The `attach` tool: the model names a file it wrote in its working directory, `attach(path)` checks and
 * records it (null) or says why not, and the turn's final block carries the recorded paths as `files`.
 */
function attachTool(attach) {
  return tool(
    'attach',
    'Attach a file from your working directory to your answer: the chat receives it with your reply ' +
      '(images are shown). Write the file first, then attach it by its path.',
    { path: z.string().min(1).max(4096).describe('the file, relative to the working directory') },
    async ({ path }) => {
      const why = attach(path);
      if (why) return refused(why);
      return { content: [{ type: 'text', text: `Attached: ${path}. It is sent with this answer.` }] };
    },
  );
}

/**
 * A call of this server that a cut-off turn made before a crash and whose result the session keeps
 * (resume.mjs): the turn goes on without calling it again, so what it recorded is recorded again, for the
 * turn's final block. `call` is `{name, input}`; calls of other servers, or of an action not offered, are
 * skipped.
 */
export function replay(types, call, record, attach) {
  const prefix = `mcp__${SERVER}__`;
  if (typeof call.name !== 'string' || !call.name.startsWith(prefix)) return;
  const type = call.name.slice(prefix.length);
  if (type === 'attach') {
    if (typeof call.input?.path === 'string') attach(call.input.path);
    return;
  }
  const a = types.includes(type) ? ACTIONS[type] : undefined;
  if (a && !a.check?.(call.input)) record(a.action(call.input));
}

/**
 * The tool server: `attach` (always), one tool per action type of `types` (from offered()), each call
 * handed to `record(action)`, and the memory questions `extra` (memory.mjs). Also returns the full tool names.
 */
export function actionServer(types, record, attach, extra = []) {
  const tools = types.map((type) => {
    const a = ACTIONS[type];
    return tool(type, a.description, a.shape, async (args) => {
      const why = a.check?.(args);
      if (why) return refused(why);
      record(a.action(args));
      return done(a.summary(args));
    });
  });
  tools.push(attachTool(attach), ...extra);
  return {
    // Always in the prompt (a few small tools), never deferred behind tool search: the model must see them
    // from the first turn on, and the session waits for the server before that turn.
    server: createSdkMcpServer({ name: SERVER, version: '1.0.0', tools, alwaysLoad: true }),
    names: [...types, 'attach', ...extra.map((t) => t.name)].map((t) => `mcp__${SERVER}__${t}`),
    actions: types.length > 0,
  };
}
