// The crash campaign's agent (bench/crash.ts): a realistic, unreliable agent. It works through its stdin
// lines one at a time and, per turn:
//   - thinks a random 20–800 ms, then answers with one block `r-<nonce> tok-… tok-…` naming the tokens of
//     the messages it read in that turn (the nonce identifies the reply row among the platform's sends);
//   - now and then prints a partial draft first, and sometimes a second block for the same turn;
//   - in 2 % of turns exits 1 in the middle of the turn, in 1 % hangs until gated's hard timeout kills it.
// One group in five gets an agent that predates turns (no `turn` in its blocks, never a draft).
// Its pid is a file in $CRASH_PIDS while it lives, so the campaign can kill it together with gated.
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const pidFile = process.env.CRASH_PIDS ? join(process.env.CRASH_PIDS, String(process.pid)) : null;
if (pidFile) writeFileSync(pidFile, '');
const forget = () => {
  if (pidFile) rmSync(pidFile, { force: true });
};

const nonce = () => `r-${randomBytes(6).toString('hex')}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const emit = (block) => process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);

let numbered = true;
const lines = [];
let closed = false;
let wake = () => {};

async function work() {
  for (let next = 0; ; next++) {
    while (next >= lines.length) {
      if (closed) return;
      await new Promise((r) => (wake = r));
    }
    const { turn, messages } = lines[next];
    const fate = Math.random();
    if (fate < 0.02) {
      await sleep(Math.random() * 400);
      forget();
      process.exit(1);
    }
    if (fate < 0.03) await new Promise(() => {}); // hangs: gated's hard timeout ends it
    await sleep(20 + Math.random() * 780);
    const tokens = messages.flatMap((m) => String(m.content).match(/tok-\d+/g) ?? []);
    const tag = numbered ? { turn } : {};
    emit({ status: 'ok', result: `${nonce()} ${tokens.join(' ')}`, ...tag });
    if (numbered && Math.random() < 0.1) emit({ status: 'ok', result: `${nonce()} also`, ...tag });
  }
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
    read += 1;
    if (read === 1) numbered = !/(^|\/)c\d*[05]$/.test(String(input.group));
    const turn = Number.isInteger(input.turn) ? input.turn : read;
    if (numbered && Math.random() < 0.3) {
      emit({ status: 'ok', result: `${nonce()} drafting`, partial: true, turn });
    }
    lines.push({ turn, messages: Array.isArray(input.messages) ? input.messages : [] });
    wake();
  })
  .on('close', () => {
    closed = true;
    wake();
  });

await work();
forget();
