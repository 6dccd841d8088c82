// An agent that asks before its tool calls, in the middle of its turns, as the Claude and Codex agents do
// (docs/PROTOCOL.md "Tool questions"): it works through its stdin lines one at a time, thinks THINK_MS,
// then asks every `!ask` of the turn at once and waits for their `permission` lines before it goes on.
//
// Environment (set in the command line, the process runtime passes nothing else):
//   THINK_MS  think time before the asks and after the answers (default 150)
// A message's content, one directive a line:
//   !ask {"tool":T,"input":{…},"summary":S}   ask about one call (all of a turn's asks go out together)
//   #stall                                    after the answers, never answer the turn (the test ends it)
// An `interrupt` line for the turn in progress stops it at once: it answers `"interrupted": true` and does
// not wait for the asks still open; a call whose turn was interrupted never runs, even when an `allow`
// for it arrives later. An allowed call "runs": it is appended to `.tool-runs.log` in the working folder.
// Every line it reads and every block it prints is logged to agent-log.jsonl, so a test can count the
// answers each ask got.
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const THINK_MS = Number(process.env.THINK_MS ?? 150);

const log = (event) => appendFileSync('agent-log.jsonl', JSON.stringify({ ...event, t: Date.now() }) + '\n');
const emit = (block) => {
  process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
  log({ ev: 'block', block });
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const turns = [];
let wakeWorker = () => {};
let closed = false;
let nextAsk = 1;
/** Asks waiting for their permission line, by id. */
const open = new Map();
/** The turn in progress, and how to stop it early. */
let current = null;

function asksOf(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = /^!ask (.*)$/.exec(line.trim());
    if (m) out.push(JSON.parse(m[1]));
  }
  return out;
}

function ask(call, turn) {
  const id = `a${nextAsk++}`;
  return new Promise((resolve) => {
    open.set(id, { call, turn, resolve });
    // Numbered like its answers: gated learns at once that this agent can be interrupted.
    emit({
      status: 'ok',
      result: null,
      turn,
      ask: { id, tool: call.tool, input: call.input, summary: call.summary },
    });
  });
}

async function work({ turn, messages }) {
  const text = messages.map((m) => m.content).join('\n');
  let stop;
  const stopped = new Promise((r) => (stop = r));
  current = { turn, stop };
  const interrupted = () =>
    emit({ status: 'ok', result: `turn ${turn} interrupted`, turn, interrupted: true });
  if ((await Promise.race([sleep(THINK_MS).then(() => false), stopped])) === true) return interrupted();
  const calls = asksOf(text);
  const answers = await Promise.race([Promise.all(calls.map((c) => ask(c, turn))), stopped]);
  if (answers === true) return interrupted();
  const said = calls.map((c, i) => {
    const p = answers[i];
    if (p.decision !== 'allow') return `tool ${c.tool} denied: ${p.note ?? 'no reason given'}`;
    appendFileSync('.tool-runs.log', `${c.tool} ${JSON.stringify(c.input)}\n`);
    return `tool ${c.tool} ran`;
  });
  if (text.includes('#stall')) {
    log({ ev: 'stall', turn });
    return new Promise(() => {});
  }
  await sleep(THINK_MS);
  emit({ status: 'ok', result: [`did turn ${turn}`, ...said].join('\n'), turn });
}

async function worker() {
  for (let next = 0; ; next++) {
    while (next >= turns.length) {
      if (closed) return;
      await new Promise((r) => (wakeWorker = r));
    }
    await work(turns[next]);
    current = null;
  }
}

createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on('line', (line) => {
    if (line.trim() === '') return;
    const input = JSON.parse(line);
    if (input.type === 'permission') {
      log({ ev: 'permission', id: input.id, decision: input.decision, note: input.note, by: input.by });
      const waiting = open.get(input.id);
      open.delete(input.id);
      waiting?.resolve(input);
      return;
    }
    if (input.type === 'interrupt') {
      log({ ev: 'interrupt', turn: input.turn });
      if (current && current.turn <= input.turn) {
        // Its asks are abandoned: an answer that comes for them later is logged and never acted on.
        for (const [id, a] of open) if (a.turn === current.turn) open.delete(id);
        current.stop(true);
      }
      return;
    }
    const turn = Number.isInteger(input.turn) ? input.turn : turns.length + 1;
    log({ ev: 'line', turn, ids: (input.messages ?? []).map((m) => m.id) });
    turns.push({ turn, messages: input.messages ?? [] });
    wakeWorker();
  })
  .on('close', () => {
    closed = true;
    log({ ev: 'eof' });
    wakeWorker();
  });

await worker();
log({ ev: 'exit' });
