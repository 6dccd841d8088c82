// A test agent for workflows (docs/WORKFLOWS.md): each turn is answered with `<agent>/<model>: <content>`
// (its agent and model as the input line named them) and recorded in `.wf-answers.log` of its folder, one
// line per answer, so a test counts how often each step was answered. Markers in the content:
//   `!hold`      writes `.wf-held-<topic>` and answers only once `.wf-release` exists (a test kills gated
//                meanwhile, or releases it);
//   `!barrier N` writes `.wf-barrier-<topic>` and waits until N such files exist: it answers `together`
//                when they did within 20 s, else `alone` (two steps that ran one after the other).
import { appendFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
let agent = 'agent';
let model = 'none';
let topic = '';
let chain = Promise.resolve();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function answer(input) {
  const content = (input.messages ?? []).map((m) => String(m.content)).join('\n');
  const extra = [];
  if (content.includes('!hold')) {
    writeFileSync(`.wf-held-${topic}`, '');
    while (!existsSync('.wf-release')) await sleep(50);
  }
  const barrier = /!barrier (\d+)/.exec(content);
  if (barrier) {
    writeFileSync(`.wf-barrier-${topic}`, '');
    const want = Number(barrier[1]);
    const end = Date.now() + 20_000;
    let n = 0;
    while (
      (n = readdirSync('.').filter((f) => f.startsWith('.wf-barrier-')).length) < want &&
      Date.now() < end
    )
      await sleep(50);
    extra.push(n >= want ? 'together' : 'alone');
  }
  const text = [`${agent}/${model}: ${content}`, ...extra].join('\n');
  appendFileSync('.wf-answers.log', `${topic}\n`);
  const block = {
    status: 'ok',
    result: text,
    ...(typeof input.turn === 'number' ? { turn: input.turn } : {}),
  };
  process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  const input = JSON.parse(line);
  if (input.type === 'end') return rl.close();
  if (input.type !== undefined) return;
  if (typeof input.agent === 'string') agent = input.agent;
  if (typeof input.model === 'string') model = input.model;
  if (typeof input.topic === 'string') topic = input.topic;
  chain = chain.then(() => answer(input));
});
rl.on('close', () => void chain.then(() => process.exit(0)));
