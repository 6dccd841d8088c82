// The example agent shipped with gated: plain Node, no dependencies. It speaks the agent protocol
// (docs/PROTOCOL.md) and answers every input line (a turn) with one output block that proves it read each
// message, `echo: <content>`, and names the turn it answers. It keeps a session id (the one gated passes in,
// or a new one) and exits on end of stdin.
//
// It also shows actions (docs/PROTOCOL.md): a message starting with one of these asks for one, if the
// group's `capabilities` include it:
//   !send <chat_jid> <text>        !delegate <group> <text>        !escalate <text>        !react <emoji>
//   !schedule every|at <spec> <text>   !schedule cron "<5 fields>" <text>   !action <raw JSON action(s)>
// and it repeats gated's system notes (a refused action, a reset session) as `system: <note>` lines.
//
// `!tool NAME INPUT` tries the approval flow (docs/APPROVALS.md) without a model: the agent asks gated
// before "running" tool NAME (INPUT is JSON, or for any other text the command `{"command": INPUT}`),
// waits for the `permission` line, and answers `tool NAME ran: INPUT` or `tool NAME denied: NOTE`. A run
// it was allowed is appended to `.tool-runs.log` in its folder (tests count them: a tool runs once).
//
// Memory (docs/MEMORY.md): `!remember TEXT` (or `!remember sender TEXT`, about the sender only) and
// `!forget ID` are actions; `!recall QUERY` and `!search QUERY` ask gated (a `memory` block) and answer
// `recall: #ID TEXT` or `found: #ID SENDER: TEXT` per result from gated's `memory` line. The facts gated
// gives with a turn (its `memory`) lead the answer as `memory: #ID [SCOPE] TEXT` lines.
//
// Use it as a template for a real agent: read JSON lines from stdin, print blocks between the markers on
// stdout, log to stderr, never print secrets.
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';

let sessionId = null;
let turns = 0;
let capabilities = [];

function emit(block) {
  process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
}

/** The action a message asks for, or null. */
function actionOf(content) {
  const m = /^!(\w+)\s*([\s\S]*)$/.exec(content.trim());
  if (!m) return null;
  const [, verb, rest] = m;
  const word = /^(\S+)\s+([\s\S]+)$/.exec(rest);
  switch (verb) {
    case 'send':
      return word && { type: 'send', chat_jid: word[1], text: word[2] };
    case 'delegate':
      return word && { type: 'delegate', group: word[1], text: word[2] };
    case 'escalate':
      return rest ? { type: 'escalate', text: rest } : null;
    case 'react':
      return rest ? { type: 'react', emoji: rest.trim() } : null;
    case 'schedule': {
      const cron = /^cron\s+"([^"]+)"\s+([\s\S]+)$/.exec(rest);
      if (cron) return { type: 'schedule', cron: cron[1], text: cron[2] };
      const other = /^(every|at)\s+(\S+)\s+([\s\S]+)$/.exec(rest);
      return other && { type: 'schedule', [other[1]]: other[2], text: other[3] };
    }
    case 'remember': {
      const about = /^sender\s+([\s\S]+)$/.exec(rest);
      if (about) return { type: 'remember', text: about[1], scope: 'sender' };
      return rest ? { type: 'remember', text: rest } : null;
    }
    case 'forget':
      return /^\d+$/.test(rest.trim()) ? { type: 'forget', id: Number(rest.trim()) } : null;
    case 'action':
      try {
        return JSON.parse(rest);
      } catch {
        return { malformed: rest };
      }
    default:
      return null;
  }
}

/** Questions waiting for gated's permission line, by ask id. */
const waiting = new Map();
let asks = 0;
/** Turns are answered in order, one after the other, even while one waits for a permission. */
let chain = Promise.resolve();

/** `!tool NAME INPUT` → {tool, input}, or null. */
function toolOf(content) {
  const m = /^!tool\s+(\S+)\s*([\s\S]*)$/.exec(String(content).trim());
  if (!m) return null;
  let input;
  try {
    input = JSON.parse(m[2]);
  } catch {
    input = { command: m[2] };
  }
  return { tool: m[1], input };
}

/** Asks gated about one tool call and resolves with its permission line. */
function askFor(tool, input) {
  asks += 1;
  const id = `ask-${asks}`;
  const summary = `${tool} ${typeof input.command === 'string' ? input.command : JSON.stringify(input)}`;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    emit({ status: 'ok', result: null, ask: { id, tool, input, summary } });
  });
}

async function runTools(messages) {
  const lines = [];
  for (const m of messages) {
    const call = toolOf(m.content);
    if (!call) continue;
    const p = await askFor(call.tool, call.input);
    const shown = JSON.stringify(call.input);
    if (p.decision === 'allow') {
      appendFileSync('.tool-runs.log', `${call.tool} ${shown}\n`);
      lines.push(`tool ${call.tool} ran: ${shown}`);
    } else lines.push(`tool ${call.tool} denied: ${p.note ?? 'no reason given'}`);
  }
  return lines;
}

/** Memory questions waiting for gated's `memory` line, by id. */
const remembering = new Map();

/** `!recall QUERY` / `!search QUERY`: one memory question each, answered from gated's line. */
async function askMemory(messages) {
  const lines = [];
  for (const m of messages) {
    const q = /^!(recall|search)\s+([\s\S]+)$/.exec(String(m.content).trim());
    if (!q) continue;
    asks += 1;
    const id = `mem-${asks}`;
    const op = q[1] === 'recall' ? 'recall' : 'search_history';
    const got = await new Promise((resolve) => {
      remembering.set(id, resolve);
      emit({ status: 'ok', result: null, memory: { id, op, query: q[2] } });
    });
    if (got.error) lines.push(`${q[1]} failed: ${got.error}`);
    for (const f of got.facts ?? []) lines.push(`recall: #${f.id} ${f.text}`);
    for (const h of got.messages ?? []) lines.push(`found: #${h.id} ${h.sender}: ${h.content}`);
    if ((got.facts ?? got.messages ?? []).length === 0) lines.push(`${q[1]}: nothing`);
  }
  return lines;
}

async function answer(turn, prompt, messages, memory) {
  const tools = [...(await runTools(messages)), ...(await askMemory(messages))];
  turns += 1;
  const notes = [...String(prompt ?? '').matchAll(/<system>([\s\S]*?)<\/system>/g)].map((m) => m[1]);
  // The facts gated gave with the turn (docs/MEMORY.md) are data, shown as such; never acted on.
  const facts = (Array.isArray(memory) ? memory : []).map((f) => `memory: #${f.id} [${f.scope}] ${f.text}`);
  const lines = [
    ...notes.map((n) => `system: ${n}`),
    ...facts,
    ...messages.map((m) => `echo: ${m.content}`),
    ...tools,
  ];
  const actions = messages.flatMap((m) => {
    const a = actionOf(String(m.content));
    return a === null ? [] : Array.isArray(a) ? a : [a];
  });
  // `turn` tells gated which line this block answers, so it may write the next one before this answer.
  const numbered = Number.isInteger(turn) ? { turn } : {};
  const acting = actions.length > 0 ? { actions } : {};
  emit({ status: 'ok', result: lines.join('\n'), newSessionId: sessionId, ...numbered, ...acting });
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
let first = true;

rl.on('line', (line) => {
  if (line.trim() === '') return;
  let input;
  try {
    input = JSON.parse(line);
  } catch {
    process.stderr.write('example agent: a stdin line was not JSON\n');
    return;
  }
  // Nor is a memory line: it answers a memory question.
  if (input.type === 'memory') {
    const resolve = remembering.get(input.id);
    remembering.delete(input.id);
    resolve?.(input);
    return;
  }
  // A permission line is not a turn: it answers one of our questions.
  if (input.type === 'permission') {
    const resolve = waiting.get(input.id);
    waiting.delete(input.id);
    resolve?.(input);
    return;
  }
  // The explicit end of input (the swarm runtime's stdin never reaches EOF): the same as EOF.
  if (input.type === 'end') {
    rl.close();
    process.stdin.destroy();
    return;
  }
  if (first) {
    first = false;
    sessionId =
      typeof input.sessionId === 'string' && input.sessionId ? input.sessionId : `example-${randomUUID()}`;
    capabilities = Array.isArray(input.capabilities) ? input.capabilities : [];
    process.stderr.write(
      `example agent: group=${input.group} topic=${input.topic} session=${sessionId} ` +
        `capabilities=${capabilities.join(',') || 'none'}\n`,
    );
  }
  const messages = Array.isArray(input.messages) ? input.messages : [];
  chain = chain.then(() => answer(input.turn, input.prompt, messages, input.memory));
});

rl.on('close', () => {
  process.stderr.write(`example agent: stdin closed after ${turns} turn(s)\n`);
  process.exitCode = 0;
});
