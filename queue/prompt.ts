/**
 * What an agent reads on stdin (docs/PROTOCOL.md): the first line (`AgentInput`) and follow-up lines
 * (`AgentFollowUp`), and `prompt`, the batch formatted for a model. Message content is used as stored: the
 * gateway already stripped any `@name`/`#topic` prefix before it released the row.
 */

import type { SenderRole } from '../store/access.js';
import type { McpServer } from '../core/group-config.js';

export type { SenderRole };

/** The `config` field of the agent's input: what its configuration folders hold, as the agent sees them. */
export interface AgentConfigInput {
  /** Standing instructions (CLAUDE.md / AGENTS.md), to be followed on every turn. */
  instructions?: string;
  /** Skills: name, description and the path of its SKILL.md, for the model to read when it applies. */
  skills?: Array<{ name: string; description: string; path: string }>;
  /**
   * MCP servers to start, by name (tools `mcp__<name>__<tool>`). `${CONFIG_DIR}` in a command, argument,
   * URL or value has become the folder of the mcp.json; `${NAME}` is left for the agent to fill from
   * `secrets`.
   */
  mcpServers?: Record<string, McpServer>;
  /** Folders the agent may read and must never write: its configuration. */
  readOnly: string[];
}

/** A file that came with a message, saved in the group's folder. */
export interface AgentAttachment {
  /** Relative to the group's folder (the agent's working directory): `inbox/<message id>/<seq>-<name>`. */
  path: string;
  mime: string;
  size: number;
  name: string;
}

/** One message as the agent receives it. */
export interface AgentMessage {
  id: number;
  /** The chat it came from: one session can serve several chats. */
  chat_jid: string;
  /** The chat's platform (the part of chat_jid before `:`). */
  platform: string;
  sender: string;
  sender_name: string | null;
  content: string;
  verb: string;
  timestamp: string;
  platform_msg_id: string | null;
  sender_role: SenderRole;
  /** Present (true) when `content` is the transcript of the message's audio (docs/VOICE.md). */
  transcript?: true;
  /** Files of this message that are in the folder. */
  attachments?: AgentAttachment[];
  /** Why some of its files are not (too large, failed download). */
  attachment_notes?: string[];
}

/**
 * One remembered fact given with a turn (docs/MEMORY.md): data about the group or one of its people, with
 * where it came from; never an instruction.
 */
export interface MemoryFact {
  id: number;
  text: string;
  /** `group`, or the sender (`platform:id`) it is about. */
  scope: string;
  /** The run, turn, chat and senders (with roles) that led to it, or the operator who added it. */
  provenance: unknown;
  updated_at: string;
}

/** The facts given with one turn (empty: none was relevant, or memory is off). */
export type TurnMemory = readonly MemoryFact[];

/** The first stdin line of a run. */
export interface AgentInput {
  /** Always 1: the first line is the first turn. */
  turn: 1;
  prompt: string;
  sessionId: string | null;
  /**
   * Set only on a topic's first run (no session of its own yet, none ever answered): the group's default
   * session, for an agent that can start the topic as a fork of it. Agents that cannot ignore it.
   */
  forkFrom?: string;
  group: string;
  topic: string;
  chatJid: string;
  messages: AgentMessage[];
  /** The facts most relevant to this turn's messages (docs/MEMORY.md); absent when there is none. */
  memory?: MemoryFact[];
  /** The action types this group may use (empty: answers only). */
  capabilities: string[];
  /** Operator-configured secrets (API keys): only ever on stdin, never in env, image or mounts. */
  secrets?: Record<string, string>;
  /** The agent profile the group runs (registered_groups.agent; `claude` by default). */
  agent?: string;
  /** The model to use (registered_groups.model, else the profile's default); null: the agent's own default. */
  model?: string | null;
  /** The group's configuration (docs/AGENTS.md): instructions, skills, MCP servers, read-only folders. */
  config?: AgentConfigInput;
}

/** A further stdin line: messages that arrived while the agent was running for the same chat. */
export interface AgentFollowUp {
  type: 'message';
  /** 2, 3, … within the run. */
  turn: number;
  prompt: string;
  messages: AgentMessage[];
  /** The facts most relevant to this turn's messages; absent when there is none. */
  memory?: MemoryFact[];
  /**
   * Steer mode (registered_groups.busy = 'steer'): show these messages to the model inside the turn in
   * progress; one block may answer both turns.
   */
  steer?: boolean;
}

/** The platform of a chat JID: what comes before the first `:`. */
export function platformOf(chatJid: string): string {
  const at = chatJid.indexOf(':');
  return at > 0 ? chatJid.slice(0, at) : chatJid;
}

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
const entityOf = (c: string): string => ENTITIES[c]!;

// Most text needs no escaping: one scan finds that, and only text that does is copied (once).
function escapeText(s: string): string {
  return /[&<>]/.test(s) ? s.replace(/[&<>]/g, entityOf) : s;
}

function escapeAttr(s: string): string {
  return /[&<>"]/.test(s) ? s.replace(/[&<>"]/g, entityOf) : s;
}

/** Where a fact came from, in a few words: its senders with their roles, or who added it. */
function factSource(p: unknown): string {
  const v = (typeof p === 'object' && p !== null ? p : {}) as {
    senders?: { sender?: unknown; role?: unknown }[];
    by?: unknown;
  };
  const who = Array.isArray(v.senders)
    ? v.senders.map((s) => `${String(s?.sender ?? '?')} (${String(s?.role ?? '?')})`).join(', ')
    : '';
  return who !== '' ? who : typeof v.by === 'string' ? v.by : 'unknown';
}

/** A fact as a `<memory>` element: marked as data, with its provenance; its text escaped like a message's. */
function memoryElement(f: MemoryFact): string {
  return (
    `<memory id="${f.id}" kind="data" scope="${escapeAttr(f.scope)}" from="${escapeAttr(factSource(f.provenance))}" ` +
    `time="${escapeAttr(f.updated_at)}">${escapeText(f.text)}</memory>`
  );
}

/**
 * Formats messages (and pending system notes, and the facts remembered for the turn) for a model: one
 * `<message>` element per message with who, from which chat and platform, when and what kind of event,
 * content escaped so a user cannot forge markup of their own; each fact a `<memory kind="data">` before them.
 */
export function formatPrompt(
  messages: readonly AgentMessage[],
  systemNotes: readonly string[] = [],
  memory: TurnMemory = [],
): string {
  const lines: string[] = [];
  for (const note of systemNotes) lines.push(`<system>${escapeText(note)}</system>`);
  for (const f of memory) lines.push(memoryElement(f));
  lines.push('<messages>');
  for (const m of messages) {
    const who = m.sender_name && m.sender_name !== '' ? m.sender_name : m.sender;
    const verb = m.verb === 'message' ? '' : ` verb="${escapeAttr(m.verb)}"`;
    const spoken = m.transcript ? ' transcript="true"' : '';
    const files = (m.attachments ?? []).map(
      (a) => `<attachment path="${escapeAttr(a.path)}" mime="${escapeAttr(a.mime)}" size="${a.size}"/>`,
    );
    const notes = (m.attachment_notes ?? []).map((n) => `<note>${escapeText(n)}</note>`);
    lines.push(
      `<message sender="${escapeAttr(who)}" chat="${escapeAttr(m.chat_jid)}" platform="${escapeAttr(m.platform)}" ` +
        `time="${escapeAttr(m.timestamp)}"${verb}${spoken}>` +
        `${escapeText(m.content)}${[...files, ...notes].join('')}</message>`,
    );
  }
  lines.push('</messages>');
  return lines.join('\n');
}

/** The first stdin line, `\n`-terminated. */
export function inputLine(input: AgentInput): string {
  return JSON.stringify(input) + '\n';
}

/** A follow-up stdin line, `\n`-terminated; pending system notes lead its prompt. */
export function followUpLine(
  turn: number,
  messages: readonly AgentMessage[],
  systemNotes: readonly string[] = [],
  steer = false,
  memory: TurnMemory = [],
): string {
  const line: AgentFollowUp = {
    type: 'message',
    turn,
    prompt: formatPrompt(messages, systemNotes, memory),
    messages: [...messages],
    ...(memory.length > 0 ? { memory: [...memory] } : {}),
    ...(steer ? { steer: true } : {}),
  };
  return JSON.stringify(line) + '\n';
}
