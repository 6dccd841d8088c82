// A test agent that takes its time (docs/PROTOCOL.md): each input line (a turn) is answered with
// `done: <content>` after the number of milliseconds given as its argument (default 300), one turn after
// another. It exits on end of stdin, at once, so a run's end after an idle close is the idle timeout.
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const delayMs = Number(process.argv[2] ?? 300);

let queue = Promise.resolve();
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  const input = JSON.parse(line);
  queue = queue.then(() => answer(input));
});
rl.on('close', () => void queue.then(() => process.exit(0)));

async function answer(input) {
  await new Promise((r) => setTimeout(r, delayMs));
  const text = (input.messages ?? []).map((m) => `done: ${m.content}`).join('\n');
  const block = {
    status: 'ok',
    result: text,
    ...(typeof input.turn === 'number' ? { turn: input.turn } : {}),
  };
  process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
}
