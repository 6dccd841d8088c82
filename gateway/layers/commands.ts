import { commandNames } from '../../core/group-config.js';
import { sessionKeyId, type SessionKey } from '../../core/types.js';
import { principalOf } from '../../store/access.js';
import { sessionsOf } from '../../store/sessions.js';
import { WorktreeStore } from '../../store/worktrees.js';
import { clipText } from '../../core/text.js';
import { isTopicName } from './names.js';
import { decideCode } from '../tool-decisions.js';
import { listWorkflows } from '../../core/workflows.js';
import { forgetCommand, memoryCommand } from './memory-command.js';
import { workflowCommand } from './workflow-command.js';
import { workflowFacts } from '../workflow-runs.js';
import type { Passage, Layer, LayerEnv } from './types.js';

/**
 * One gateway command: its help line and what it does. `run` returns 'continue' when the message goes on
 * through the layers as text for the agent (an /interrupt with text); otherwise the gateway handled it.
 */
interface CommandSpec {
  help: string;
  run(passage: Passage, args: string[], env: LayerEnv): void | 'continue';
}

function keyOf(passage: Passage, env: LayerEnv, topic?: string): SessionKey | undefined {
  const group = passage.group ?? env.chatGroup(passage);
  return group ? { group, topic: topic ?? env.sessionTopic(passage, group) } : undefined;
}

const NO_GROUP = 'this chat has no group yet: no route sends it anywhere';

/** `/approve` and `/reject`: the code decided (tool_approvals, pairing codes), the waiting workers told. */
function decide(passage: Passage, args: readonly string[], env: LayerEnv, approve: boolean): void {
  const group = passage.group ?? env.chatGroup(passage);
  env.answer(passage.msg, decideCode(env.db, env.access, passage.msg, args, approve, env.now, group));
  env.decided();
}

/** The command table (docs/ROUTING.md, layer 2). Names are matched case-insensitively. */
export const COMMANDS: Record<string, CommandSpec> = {
  new: {
    help: "/new [#topic]: start a fresh agent session (default topic or this thread's, or that topic)",
    run(passage, args, env) {
      const topicArg = args[0]?.startsWith('#') ? args[0].slice(1) : undefined;
      if (topicArg !== undefined && !isTopicName(topicArg)) {
        env.answer(passage.msg, `bad topic '${args[0]}'`);
        return;
      }
      // Without a #topic: the default topic, or the thread the message is in where threads are topics.
      const group = passage.group ?? env.chatGroup(passage);
      const thread = group ? env.sessionTopic({ ...passage, topic: undefined }, group) : '';
      const key = keyOf(passage, env, topicArg ?? thread);
      if (!key) return env.answer(passage.msg, NO_GROUP);
      const refused = env.access.refusal(passage.msg, key.group);
      if (refused) return env.answer(passage.msg, `/new refused: ${refused}`);
      // The row and the note go in the batch's transaction; the queue then only tells a running agent.
      const sessions = sessionsOf(env.db);
      sessions.drop(key);
      sessions.note(key, 'The session was reset by /new: earlier conversation is gone.');
      // A topic with a worktree of its own (docs/WORKTREES.md) starts from the base branch again: the
      // worktree goes once no run uses it, its branch kept when it holds unpushed work.
      const tree = new WorktreeStore(env.db).requestRemoval(
        key.group,
        key.topic,
        '/new',
        passage.msg.chat_jid,
      );
      env.afterCommit(() => env.queue.resetSession(key));
      env.answer(
        passage.msg,
        `new session for ${sessionKeyId(key)}` +
          (tree ? '; its worktree is removed, its unpushed work kept' : ''),
      );
    },
  },
  ping: {
    help: '/ping: pong, then group, session and queue facts',
    run(passage, _args, env) {
      const key = keyOf(passage, env);
      const lines = ['pong'];
      const refused = key && env.access.refusal(passage.msg, key.group);
      if (!key) lines.push(NO_GROUP);
      else if (refused) lines.push(`(group facts are for members: ${refused})`);
      else {
        const session = sessionsOf(env.db).get(key);
        const f = env.queue.facts(key);
        lines.push(`group: ${key.group}${key.topic ? ' #' + key.topic : ''}`);
        // Session ids come from agents: echo a bounded piece, never megabytes.
        lines.push(
          `session: ${session === undefined || session === null ? 'none (next run starts fresh)' : clipText(String(session), 128)}`,
        );
        lines.push(
          `queue: ${f.running ? 'agent running' : 'idle'}, ${f.waiting} waiting` +
            (f.backoffUntil ? `, retry after ${new Date(f.backoffUntil).toISOString()}` : ''),
        );
      }
      env.answer(passage.msg, lines.join('\n'));
    },
  },
  chatid: {
    help: "/chatid: this chat's JID",
    run(passage, _args, env) {
      env.answer(passage.msg, passage.msg.chat_jid);
    },
  },
  stop: {
    help: "/stop: stop this chat's running agent; its batch is not retried",
    run(passage, _args, env) {
      const key = keyOf(passage, env);
      if (!key) return env.answer(passage.msg, NO_GROUP);
      const refused = env.access.refusal(passage.msg, key.group);
      if (refused) return env.answer(passage.msg, `/stop refused: ${refused}`);
      const { msg } = passage;
      env.afterCommit(async () => {
        const stopped = await env.queue.stop(key, msg.chat_jid);
        env.db.transaction(() =>
          env.answer(msg, stopped ? `stopped ${sessionKeyId(key)}` : 'nothing is running'),
        )();
      });
    },
  },
  interrupt: {
    help: "/interrupt [text]: stop this chat's agent's turn in progress; the text becomes the next turn",
    run(passage, _args, env) {
      // The text after the command, as written (line breaks kept).
      const text = passage.content.replace(/^\s*\/\S+\s*/, '');
      if (text !== '') {
        // A message of its sender that interrupts: the queue writes the interrupt line before it.
        passage.content = text;
        passage.interrupts = true;
        return 'continue';
      }
      const key = keyOf(passage, env);
      if (!key) return env.answer(passage.msg, NO_GROUP);
      const refused = env.access.refusal(passage.msg, key.group);
      if (refused) return env.answer(passage.msg, `/interrupt refused: ${refused}`);
      // Now, while the batch is processed: the turn in progress is the one the sender saw. Once the batch is
      // done, a message after this one in the batch may already be written as the next turn, and an
      // interrupt names the newest turn written (the agent would stop that message unread). The line goes
      // to the agent only; if the batch rolled back, the row would interrupt again when taken again.
      const asked = env.queue.interrupt(key, passage.msg.chat_jid);
      env.answer(passage.msg, asked ? `interrupting ${sessionKeyId(key)}` : 'no turn in progress');
    },
  },
  status: {
    help: '/status: instance status (admins only)',
    run(passage, _args, env) {
      // GATED_ADMINS by id or platform:id, and the web chat's token holder (store/access.ts isAdmin).
      if (!env.access.source.isAdmin(principalOf(passage.msg))) {
        return env.answer(passage.msg, '/status is for admins (GATED_ADMINS)');
      }
      const groups = env.catalog.groups.size;
      const snap = env.queue.snapshot();
      const errored = env.db
        .prepare(`SELECT DISTINCT chat_jid FROM messages WHERE state = 'parked' LIMIT 20`)
        .pluck()
        .all() as string[];
      env.answer(
        passage.msg,
        [
          `groups: ${groups}`,
          `active runs: ${snap.active.length}`,
          `queued sessions: ${snap.waiting.length}`,
          `errored chats: ${errored.length ? errored.join(', ') : 'none'}`,
        ].join('\n'),
      );
    },
  },
  approve: {
    help: '/approve CODE: allow the tool call, or let the stranger in, with this code (its approvers)',
    run: (passage, args, env) => decide(passage, args, env, true),
  },
  reject: {
    help: '/reject CODE [note]: refuse the tool call (the note reaches the agent), or the stranger',
    run: (passage, args, env) => decide(passage, args, env, false),
  },
  workflow: {
    help: '/workflow run NAME [args] | status | cancel | resume [ID]: run a workflow of this group, follow, stop or go on with it',
    run(passage, _args, env) {
      workflowCommand(passage, env);
    },
  },
  memory: {
    help: '/memory: what the agent remembers about you and this group',
    run: (passage, _args, env) => memoryCommand(passage, env),
  },
  forget: {
    help: '/forget ID | all: delete a fact of yours (an owner: any of the group), or all of them',
    run: (passage, args, env) => forgetCommand(passage, args, env),
  },
  help: {
    help: "/help: this list, and the chat commands and workflows of this chat's group",
    run(passage, _args, env) {
      const group = env.chatGroup(passage);
      const own =
        group !== undefined && env.config.configDir !== undefined
          ? commandNames(env.config.configDir, group).filter((n) => !Object.hasOwn(COMMANDS, n))
          : [];
      const lines = Object.values(COMMANDS).map((c) => c.help);
      if (own.length > 0) lines.push(`Commands of ${group}: ${own.map((n) => `/${n}`).join(' ')}`);
      const flows =
        group !== undefined && env.config.configDir !== undefined
          ? listWorkflows(env.config.configDir, group, workflowFacts(env.db))
          : [];
      if (flows.length > 0) {
        lines.push(`Workflows of ${group} (/workflow run NAME [args]):`);
        for (const f of flows)
          lines.push(
            `  ${f.name}${f.problems.length > 0 ? ': INVALID, does not run (gated workflows check)' : f.workflow?.description ? `: ${f.workflow.description}` : ''}`,
          );
      }
      env.answer(passage.msg, lines.join('\n'));
    },
  },
};

/**
 * Parses a command: the first token starts with `/` and names a gateway command, case-insensitively, with
 * an optional Telegram `@botname` suffix (`/new@my_bot`). A suffix is a command of this gateway only when
 * it names `botName`, this gateway's own username on the platform (asked only when there is a suffix): in
 * a group with several bots `/ping@otherbot` is for the other one, and while gated does not know its own
 * name it cannot tell, so a suffixed command is text (docs/SECURITY.md). Returns undefined for anything else:
 * unknown slash words are not commands and travel on as text.
 */
export function parseCommand(
  content: string,
  botName?: string | (() => string | undefined),
): { name: string; args: string[] } | undefined {
  // Only the first words matter; a huge message is not split whole.
  const words = content.slice(0, 1024).trim().split(/\s+/);
  const m = /^\/([A-Za-z_]+)(?:@([A-Za-z0-9_]+))?$/.exec(words[0] ?? '');
  if (!m) return undefined;
  const name = m[1]!.toLowerCase();
  if (!Object.hasOwn(COMMANDS, name)) return undefined;
  if (m[2] !== undefined) {
    const mine = typeof botName === 'function' ? botName() : botName;
    if (mine === undefined || m[2].toLowerCase() !== mine.toLowerCase()) return undefined;
  }
  return { name, args: words.slice(1) };
}

/** Layer 2: gateway commands are answered here and never reach an agent. */
export const commandLayer: Layer = (passage, env) => {
  // An edit is never a command (docs/SECURITY.md): changing an old message must not stop or reset a session.
  if (passage.msg.verb === 'edit') return 'next';
  if (passage.msg.verb === 'close') return closeTopic(passage, env);
  const cmd = parseCommand(passage.content, () => env.botName(passage.msg.chat_jid));
  if (!cmd) return 'next';
  if (COMMANDS[cmd.name]!.run(passage, cmd.args, env) === 'continue') return 'next';
  env.finish(passage.msg, 'command');
  return 'handled';
};

/**
 * An issue or pull request closed on its platform (verb `close`, content what closed): the topic's worktree
 * is asked to go (docs/WORKTREES.md), its branch kept when it holds unpushed work and the chat told. The row
 * never reaches an agent.
 */
function closeTopic(passage: Passage, env: LayerEnv): 'handled' {
  const key = keyOf(passage, env);
  if (
    key &&
    new WorktreeStore(env.db).requestRemoval(key.group, key.topic, passage.content, passage.msg.chat_jid)
  )
    env.afterCommit(() => env.queue.resetSession(key));
  env.finish(passage.msg, 'command');
  return 'handled';
}
