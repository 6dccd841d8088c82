// A test agent for files and drafts (docs/PROTOCOL.md). Per stdin line it answers every message:
// - a message with attachments: `saw <name> <bytes> <sha256/12> at <path>`, after reading each file from its
//   working directory (the group's folder, or the container's /workspace);
// - `send <name>`: writes out/<name> (a tiny PNG for .png, text otherwise) and answers with `files`;
// - `send-path <path>`: names <path> as it is (tests of refused paths);
// - `stream <n>`: n partial blocks ~1.1 s apart, each longer than the last, then the final text;
//   `stream <n> +<k>`: the same with k more words ` x` at the end of the final text (a long answer);
// - `hang`: the first time, one partial block and then waits forever (crash tests); in a later run (the
//   file hang.flag exists), a partial block and then `answer after restart`; `hang +<k>`: that answer with
//   k more words ` x` (too long for one message);
// - anything else: `echo: <content>`.
// Every input line is also appended to inputs.jsonl in the working directory, so tests see what it was given.
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
);

const emit = (block) => process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let queue = Promise.resolve();
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  const input = JSON.parse(line);
  appendFileSync('inputs.jsonl', `${line}\n`);
  queue = queue.then(() => answer(input));
});
rl.on('close', () => void queue.then(() => process.exit(0)));

async function answer(input) {
  const turn = typeof input.turn === 'number' ? { turn: input.turn } : {};
  const lines = [];
  const files = [];
  for (const m of input.messages ?? []) {
    const text = String(m.content ?? '');
    if (m.attachments?.length) {
      for (const a of m.attachments) {
        const data = readFileSync(a.path);
        const sha = createHash('sha256').update(data).digest('hex').slice(0, 12);
        lines.push(`saw ${a.name} ${data.length} ${sha} at ${a.path}`);
      }
    }
    for (const note of m.attachment_notes ?? []) lines.push(`note: ${note}`);
    if (text.startsWith('send ')) {
      const name = text.slice(5).trim();
      mkdirSync('out', { recursive: true });
      writeFileSync(`out/${name}`, name.endsWith('.png') ? PNG : `contents of ${name}\n`);
      files.push(`out/${name}`);
      lines.push(`here is ${name}`);
    } else if (text.startsWith('send-path ')) {
      files.push(text.slice(10).trim());
      lines.push('sending that path');
    } else if (text.startsWith('stream ')) {
      const [count, pad] = text.slice(7).trim().split(/\s+/);
      const n = Number(count);
      const words = [];
      for (let i = 1; i <= n; i++) {
        words.push(`word${i}`);
        emit({ status: 'ok', partial: true, result: words.join(' '), ...turn });
        await sleep(1100);
      }
      lines.push(`final: ${words.join(' ')} done${pad ? ' x'.repeat(Number(pad.slice(1))) : ''}`);
    } else if (text === 'hang' || text.startsWith('hang +')) {
      if (!existsSync('hang.flag')) {
        writeFileSync('hang.flag', '');
        emit({ status: 'ok', partial: true, result: 'thinking about it', ...turn });
        await new Promise(() => {});
      }
      emit({ status: 'ok', partial: true, result: 'thinking again', ...turn });
      await sleep(1100);
      const pad = Number(text.split('+')[1] ?? 0);
      lines.push(`answer after restart${' x'.repeat(pad)}`);
    } else if (!m.attachments?.length) {
      lines.push(`echo: ${text}`);
    }
  }
  emit({ status: 'ok', result: lines.join('\n'), ...(files.length ? { files } : {}), ...turn });
}
