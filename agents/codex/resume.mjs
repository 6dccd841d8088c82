// A turn the thread already holds (docs/AGENTS.md, "The Codex agent"): when gated or the agent dies in the
// middle of a turn, gated gives that turn's messages to the next run, but the thread's rollout file already
// holds the turn's prompt and the tool calls it made, with their outputs. Sending the prompt again would
// show the model the message twice and have it call its tools again.
//
// The Codex CLI cannot resume a thread at an earlier point, so the agent sends only what the thread lacks:
// when the thread's last prompt holds only messages this run was given again (each `<message>` element,
// which names its sender, chat, time and text), the first turn is a note to go on plus the messages that
// arrived since, and the kept calls of gated's own tools are recorded again for the turn's block.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { actionCall, SERVER } from './actions.mjs';

/** What the model reads when its cut-off turn goes on. */
export const CONTINUE_NOTE =
  '<system>The gateway restarted during this turn. What you did above is kept (the tool calls ran and ' +
  'their outputs are there): do not repeat it. Continue the turn and give your answer.</system>';

const ELEMENT = /<message [^>]*>[\s\S]*?<\/message>/g;
const NOTE = /<system>[\s\S]*?<\/system>/g;

/** The rollout file of `thread` under the CLI's home (`sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl`). */
function rolloutFile(dir, thread) {
  if (!existsSync(dir)) return null;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      const found = rolloutFile(p, thread);
      if (found) return found;
    } else if (e.name.endsWith(`-${thread}.jsonl`)) return p;
  }
  return null;
}

function textOf(item) {
  const c = item.content;
  if (typeof c === 'string') return c;
  return Array.isArray(c) ? c.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('\n') : '';
}

/** The thread's items (`response_item` payloads) in order; [] when it has no rollout. */
function itemsOf(home, thread) {
  const file = rolloutFile(join(home, 'sessions'), thread);
  if (file === null) return [];
  const items = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    try {
      const e = JSON.parse(line);
      if (e?.type === 'response_item' && e.payload) items.push(e.payload);
    } catch {
      // A line cut by a crash.
    }
  }
  return items;
}

/**
 * The thread's last prompt when the run's first line holds every message of it, else null: its text
 * (`said`) and the calls of tools after it whose output the thread keeps (`calls`: name, namespace, input).
 */
export function heldTurn(home, thread, first) {
  const items = itemsOf(home, thread);
  const at = items.findLastIndex(
    (i) => i.type === 'message' && i.role === 'user' && textOf(i).includes('<message '),
  );
  if (at < 0) return null;
  const said = textOf(items[at]);
  const given = new Set(typeof first.prompt === 'string' ? (first.prompt.match(ELEMENT) ?? []) : []);
  if (!(said.match(ELEMENT) ?? []).every((e) => given.has(e))) return null;
  const after = items.slice(at + 1);
  const answered = new Set(after.filter((i) => i.type === 'function_call_output').map((i) => i.call_id));
  const calls = after
    .filter((i) => i.type === 'function_call' && answered.has(i.call_id))
    .map((i) => ({ name: i.name, namespace: i.namespace, input: parse(i.arguments) }));
  return { said, calls };
}

function parse(json) {
  try {
    return JSON.parse(json);
  } catch {
    return {};
  }
}

/**
 * What the held turn's run sends first: the note to go on, gated's `<system>` notes the held prompt lacks,
 * and the `<message>` elements it does not hold.
 */
export function remainingPrompt(first, turn) {
  const prompt = typeof first.prompt === 'string' ? first.prompt : '';
  const notes = (prompt.match(NOTE) ?? []).filter((n) => !turn.said.includes(n));
  const left = (prompt.match(ELEMENT) ?? []).filter((e) => !turn.said.includes(e));
  const parts = [CONTINUE_NOTE, ...notes];
  if (left.length > 0) parts.push(['<messages>', ...left, '</messages>'].join('\n'));
  return parts.join('\n');
}

/** Records again what the held turn's kept calls of gated's actions (`types` offered) recorded. */
export function replay(turn, types, record) {
  for (const call of turn.calls) {
    if (call.namespace !== `mcp__${SERVER}` || !types.includes(call.name)) continue;
    const made = actionCall(call.name, call.input);
    if (made.action) record(made.action);
  }
}
