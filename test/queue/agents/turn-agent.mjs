// A slow agent for the turn tests: it works through its stdin lines one at a time, thinking TURN_MS per
// turn, and answers each with `echo: <content>` per message, as a real agent that takes its time would.
//
// Environment (set in the command line, the process runtime passes nothing else):
//   TURN_MS   think time per turn (default 300)
//   NUMBERED  1: blocks carry the turn they answer; 0: an agent that predates turns (default 1)
//   DRAFT     1: print a partial draft as soon as a line arrives (default 0)
//   DRAFT_MS  with DRAFT: print it this many ms after the line instead (default 0)
// Directives inside a message's content:
//   #hold=N   do not answer this turn before line N has been read
//   #freeze   after answering this turn, answer nothing more (the test kills the agent)
//   #two      answer this turn with two blocks
//   #slow=N   think N ms on this turn instead of TURN_MS
// Lines that are not turns (an `interrupt`, a `permission`) are logged and otherwise ignored: this agent
// never stops a turn early, as an agent that does not support interrupts would.
// It writes its pid to agent.pid and every event as a JSON line to agent-log.jsonl in its working
// directory, so a test can kill it and check what it read when. The pid is the machine's: in the process
// runtime's PID namespace `process.pid` is the namespace's, while /proc (the machine's, not remounted)
// names this process by the machine's pid.
import { appendFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const TURN_MS = Number(process.env.TURN_MS ?? 300);
const NUMBERED = process.env.NUMBERED !== '0';
const DRAFT = process.env.DRAFT === '1';
const DRAFT_MS = Number(process.env.DRAFT_MS ?? 0);

// Its pid as it sees it (inside the process runtime's PID namespace, that namespace's); the test finds the
// machine's pid by the NSpid line of its status and its working folder.
writeFileSync('agent.pid', String(process.pid));
const log = (event) => appendFileSync('agent-log.jsonl', JSON.stringify({ ...event, t: Date.now() }) + '\n');
const emit = (block) => process.stdout.write(`noise before\n${START}\n${JSON.stringify(block)}\n${END}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const lines = [];
let read = 0;
let closed = false;
let wakeWorker = () => {};

async function work() {
  for (let next = 0; ; next++) {
    while (next >= lines.length) {
      if (closed) return;
      await new Promise((r) => (wakeWorker = r));
    }
    const { turn, messages } = lines[next];
    const text = messages.map((m) => m.content).join(' ');
    const hold = /#hold=(\d+)/.exec(text);
    while (hold && read < Number(hold[1]) && !closed) await new Promise((r) => (wakeWorker = r));
    const slow = /#slow=(\d+)/.exec(text);
    await sleep(slow ? Number(slow[1]) : TURN_MS);
    const numbered = NUMBERED ? { turn } : {};
    const result = messages.map((m) => `echo: ${m.content}`).join('\n');
    emit({ status: 'ok', result, ...numbered });
    log({ ev: 'answer', turn });
    if (text.includes('#two')) {
      emit({ status: 'ok', result: messages.map((m) => `more: ${m.content}`).join('\n'), ...numbered });
      log({ ev: 'answer', turn, second: true });
    }
    if (text.includes('#freeze')) {
      log({ ev: 'freeze' });
      await new Promise(() => {});
    }
  }
}

createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on('line', (line) => {
    if (line.trim() === '') return;
    const input = JSON.parse(line);
    if (typeof input.type === 'string' && input.type !== 'message') {
      log({ ev: input.type, turn: input.turn });
      return;
    }
    read += 1;
    const turn = Number.isInteger(input.turn) ? input.turn : read;
    const messages = Array.isArray(input.messages) ? input.messages : [];
    const ids = messages.map((m) => m.id);
    log({ ev: 'line', turn, ids, roles: messages.map((m) => m.sender_role), steer: input.steer === true });
    if (DRAFT) {
      const draft = () =>
        emit({ status: 'ok', result: `draft of turn ${turn}`, partial: true, ...(NUMBERED ? { turn } : {}) });
      if (DRAFT_MS > 0) setTimeout(draft, DRAFT_MS);
      else draft();
    }
    lines.push({ turn, messages });
    wakeWorker();
  })
  .on('close', () => {
    closed = true;
    log({ ev: 'eof' });
    wakeWorker();
  });

await work();
log({ ev: 'exit' });
