// The example agent shipped with gated: plain Node, no dependencies. It speaks the agent protocol
// (docs/PROTOCOL.md) and answers every input line (a turn) with one output block that proves it read each
// message, `echo: <content>`, and names the turn it answers. It keeps a session id (the one gated passes in,
// or a new one) and exits on end of stdin.
//
// Use it as a template for a real agent: read JSON lines from stdin, print blocks between the markers on
// stdout, log to stderr, never print secrets.
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';

let sessionId = null;
let turns = 0;

function emit(block) {
  process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
}

function answer(turn, messages) {
  turns += 1;
  const lines = messages.map((m) => `echo: ${m.content}`);
  // `turn` tells gated which line this block answers, so it may write the next one before this answer.
  const numbered = Number.isInteger(turn) ? { turn } : {};
  emit({ status: 'ok', result: lines.join('\n'), newSessionId: sessionId, ...numbered });
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
    process.stderr.write(`example agent: group=${input.group} topic=${input.topic} session=${sessionId}\n`);
  }
  answer(input.turn, Array.isArray(input.messages) ? input.messages : []);
});

rl.on('close', () => {
  process.stderr.write(`example agent: stdin closed after ${turns} turn(s)\n`);
  process.exitCode = 0;
});
