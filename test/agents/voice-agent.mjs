// A test agent for voice (docs/VOICE.md). Per stdin line it answers every message with one line:
// `heard: <content>` and ` [transcript]` when the message is marked `transcript: true`, then ` [audio <path>]`
// for each attachment it finds in its folder; `say <words>` is answered with the words alone (a reply to
// speak). Every input line is appended to inputs.jsonl in the working
// directory, so tests see exactly what it was given; its environment (and its working directory as
// VOICE_AGENT_CWD) is written to env.json when it starts.
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const emit = (block) => process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);

writeFileSync('env.json', JSON.stringify({ ...process.env, VOICE_AGENT_CWD: process.cwd() }));
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  const input = JSON.parse(line);
  appendFileSync('inputs.jsonl', `${line}\n`);
  const lines = (input.messages ?? []).map((m) => {
    if (String(m.content).startsWith('say ')) return String(m.content).slice(4);
    const flag = m.transcript === true ? ' [transcript]' : '';
    const files = (m.attachments ?? []).map(
      (a) => ` [audio ${a.path}${existsSync(a.path) ? '' : ' missing'}]`,
    );
    return `heard: ${m.content}${flag}${files.join('')}`;
  });
  emit({
    status: 'ok',
    result: lines.join('\n'),
    ...(typeof input.turn === 'number' ? { turn: input.turn } : {}),
  });
});
rl.on('close', () => process.exit(0));
