// The agent of the `asks` bench: for its first line it asks gated about ASKS tool calls, one after the
// other, and measures each from writing the `ask` block to reading its `permission` line (performance.now,
// in this process: the pipe both ways, gated's parser, rules and stdin write). It answers the turn with the
// sorted times in ms as JSON.
import { createInterface } from 'node:readline';

const n = Number(process.env.ASKS ?? 1000);
const times = [];
let sent = 0;
let started = 0;
let turn = null;

function ask() {
  sent += 1;
  started = performance.now();
  process.stdout.write(
    `---GATED_OUTPUT_START---\n${JSON.stringify({ status: 'ok', result: null, ask: { id: `a${sent}`, tool: 'Bash', input: { command: `ls /tmp/${sent}` } } })}\n---GATED_OUTPUT_END---\n`,
  );
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line);
  if (msg.type === 'permission') {
    times.push(performance.now() - started);
    if (msg.decision !== 'allow') process.stderr.write(`ask-agent: ${msg.id} was ${msg.decision}\n`);
    if (sent < n) return ask();
    times.sort((a, b) => a - b);
    const block = { status: 'ok', result: JSON.stringify(times), turn };
    process.stdout.write(`---GATED_OUTPUT_START---\n${JSON.stringify(block)}\n---GATED_OUTPUT_END---\n`);
    return;
  }
  if (msg.type === 'end') process.exit(0);
  if (turn === null) {
    turn = msg.turn ?? 1;
    ask();
  }
});
