// The fuzz test's agent. For the `canary` group it answers every turn properly; for any other group it
// writes random output: garbage, half blocks, bad JSON, huge session ids and results, errors, early exits.
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const out = (s) => process.stdout.write(s);
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
const junk = (n) =>
  Array.from({ length: n }, () => String.fromCharCode(Math.floor(Math.random() * 0xffff))).join('');

// Follow-up lines may not repeat the group: the first line's is kept.
let group;
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  let input;
  try {
    input = JSON.parse(line);
  } catch {
    return;
  }
  if (input.type === 'end') return rl.close();
  const turn = Number.isInteger(input.turn) ? { turn: input.turn } : {};
  group ??= input.group;
  if (group === 'canary') {
    out(`${START}\n${JSON.stringify({ status: 'ok', result: 'alive', ...turn })}\n${END}\n`);
    return;
  }
  const act = pick(['junk', 'half', 'badjson', 'bigid', 'bigresult', 'error', 'exit', 'ok']);
  if (act === 'junk') out(junk(5000));
  else if (act === 'half') out(`${START}\n{"status":"ok","result":"cut`);
  else if (act === 'badjson') out(`${START}\n{nope\n${END}\n`);
  else if (act === 'bigid')
    out(
      `${START}\n${JSON.stringify({ status: 'ok', result: 'x', newSessionId: 's'.repeat(1 << 20), ...turn })}\n${END}\n`,
    );
  else if (act === 'bigresult')
    out(`${START}\n${JSON.stringify({ status: 'ok', result: junk(200_000), ...turn })}\n${END}\n`);
  else if (act === 'error')
    out(
      `${START}\n${JSON.stringify({ status: 'error', result: null, error: junk(100_000), ...turn })}\n${END}\n`,
    );
  else if (act === 'exit') process.exit(Math.floor(Math.random() * 3));
  else out(`${START}\n${JSON.stringify({ status: 'ok', result: 'fine', ...turn })}\n${END}\n`);
});
rl.on('close', () => process.exit(0));
