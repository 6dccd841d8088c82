// The crash campaign's agent (bench/crash.ts): a realistic, unreliable agent. It works through its stdin
// lines one at a time and, per turn:
//   - thinks a random 20–800 ms, then answers with one block `r-<nonce> tok-… tok-…` naming the tokens of
//     the messages it read in that turn (the nonce identifies the reply row among the platform's sends);
//   - now and then prints a partial draft first, and sometimes a second block for the same turn;
//   - in 2 % of turns exits 1 in the middle of the turn, in 1 % hangs until gated's hard timeout kills it.
// One group in five gets an agent that predates turns (no `turn` in its blocks, never a draft).
// Steering (docs/PROTOCOL.md): an `interrupt` line for turn k cuts the thinking of every turn up to k, which
// is answered at once with `"interrupted": true` and its tokens; a `"steer": true` line that arrives while
// a turn is in progress joins that turn, and one block (numbered with the steered turn) answers both. Each
// of these is appended as a word to $CRASH_EVENTS, so the campaign can count them.
// With CRASH_PART_FOUR=1 (bench/crash.ts `partFour`), in the groups whose agents number their turns: a
// turn whose first token is a multiple of CRASH_ASK_EVERY (7 unless set) asks about a shell call first (an
// `ask` block, docs/APPROVALS.md) and waits for its `permission` line before it thinks (a person decides,
// so kills land while asks are pending); and every block remembers `fact tok-N` for one token N in five (floor(N / 7) % 5 = 0; a `remember`
// action, applied with the block). The words `asked ID` and `permission ID DECISION` go to $CRASH_EVENTS.
// Its pid is a file in $CRASH_PIDS while it lives, so the campaign can kill it together with gated.
import { randomBytes } from 'node:crypto';
import { appendFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const pidFile = process.env.CRASH_PIDS ? join(process.env.CRASH_PIDS, String(process.pid)) : null;
if (pidFile) writeFileSync(pidFile, '');
const forget = () => {
  if (pidFile) rmSync(pidFile, { force: true });
};
const note = (word) => {
  if (process.env.CRASH_EVENTS) appendFileSync(process.env.CRASH_EVENTS, `${word}\n`);
};

const nonce = () => `r-${randomBytes(6).toString('hex')}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const emit = (block) => process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);

let numbered = true;
const lines = [];
let closed = false;
let wake = () => {};
/** The turn being worked on (its messages grow when a steered line joins it), or null between turns. */
let current = null;
/** Turns up to this one were interrupted. */
let interruptedThrough = 0;
const PART_FOUR = process.env.CRASH_PART_FOUR === '1';
/** A turn asks when its first token is a multiple of this (CRASH_ASK_EVERY, default 7). */
const ASK_EVERY = Number(process.env.CRASH_ASK_EVERY ?? 7) || 7;
/** Asks waiting for their permission line: id → resolve(decision). */
const asking = new Map();

/** Asks about a shell call and waits for the decision (any: the turn goes on either way). */
function ask(item, token) {
  const id = `ask-${item.turn}-${randomBytes(3).toString('hex')}`;
  note(`asked ${id}`);
  emit({
    status: 'ok',
    result: null,
    turn: item.turn,
    ask: { id, tool: 'Bash', input: { command: `make deploy ${token}` }, summary: `deploy ${token}` },
  });
  return new Promise((resolve) => asking.set(id, resolve));
}

/** The facts a block remembers: one per token in five. */
function remembered(tokens) {
  if (!PART_FOUR || !numbered) return {};
  // One token in five, by floor(N / 7) rather than N itself: tokens are dealt to the chats in turn, so
  // with 60 chats every multiple of 5 would land in a chat whose agent predates turns (c0, c5, …).
  const facts = tokens.filter((t) => Math.floor(Number(t.slice(4)) / 7) % 5 === 0);
  return facts.length === 0 ? {} : { actions: facts.map((t) => ({ type: 'remember', text: `fact ${t}` })) };
}

/** Thinks `ms`, or less when the turn is interrupted meanwhile. */
function think(item, ms) {
  if (item.turn <= interruptedThrough) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    item.cut = () => {
      clearTimeout(t);
      resolve();
    };
  });
}

async function work() {
  for (let next = 0; ; next++) {
    while (next >= lines.length) {
      if (closed) return;
      await new Promise((r) => (wake = r));
    }
    const item = lines[next];
    current = item;
    const fate = Math.random();
    if (fate < 0.02) {
      await sleep(Math.random() * 400);
      forget();
      process.exit(1);
    }
    if (fate < 0.03) await new Promise(() => {}); // hangs: gated's hard timeout ends it
    const first = item.messages.flatMap((m) => String(m.content).match(/tok-\d+/g) ?? [])[0];
    if (PART_FOUR && numbered && first && Number(first.slice(4)) % ASK_EVERY === 0) await ask(item, first);
    await think(item, 20 + Math.random() * 780);
    current = null;
    const tokens = item.messages.flatMap((m) => String(m.content).match(/tok-\d+/g) ?? []);
    const tag = numbered ? { turn: item.turn } : {};
    const interrupted = numbered && item.turn <= interruptedThrough;
    if (interrupted) note('interrupted');
    emit({
      status: 'ok',
      result: `${nonce()} ${tokens.join(' ')}`,
      ...tag,
      ...(interrupted ? { interrupted } : {}),
      ...remembered(tokens),
    });
    if (numbered && !interrupted && Math.random() < 0.1)
      emit({ status: 'ok', result: `${nonce()} also`, ...tag });
  }
}

/** A line that is not a turn: an interrupt cuts the turn in progress (and queued ones) up to its turn. */
function control(input) {
  if (input.type === 'permission' && typeof input.id === 'string') {
    note(`permission ${input.id} ${input.decision}`);
    asking.get(input.id)?.(input.decision);
    asking.delete(input.id);
    return;
  }
  if (input.type !== 'interrupt' || !Number.isInteger(input.turn)) return;
  interruptedThrough = Math.max(interruptedThrough, input.turn);
  if (current && current.turn <= interruptedThrough) current.cut?.();
}

let read = 0;
createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on('line', (line) => {
    if (line.trim() === '') return;
    let input;
    try {
      input = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof input.type === 'string' && input.type !== 'message') return control(input);
    read += 1;
    if (read === 1) numbered = !/(^|\/)c\d*[05]$/.test(String(input.group));
    const turn = Number.isInteger(input.turn) ? input.turn : read;
    const messages = Array.isArray(input.messages) ? input.messages : [];
    const inProgress = current && current.turn > interruptedThrough && lines.at(-1) === current;
    if (input.steer === true && inProgress) {
      // Shown to the turn in progress: its one block answers this turn too.
      current.messages.push(...messages);
      current.turn = turn;
      note('steered');
      return;
    }
    if (numbered && Math.random() < 0.3) {
      emit({ status: 'ok', result: `${nonce()} drafting`, partial: true, turn });
    }
    lines.push({ turn, messages });
    wake();
  })
  .on('close', () => {
    closed = true;
    wake();
  });

await work();
forget();
