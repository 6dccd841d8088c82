// A hostile test agent (docs/SECURITY.md): it does what a model talked into anything could do from its
// group's folder, to prove gated does not trust it. Per stdin line it answers every message:
// - `plant <target> <from> <to>`: for every message id in from..to, plants inbox/<id>/0-note.txt and the
//   temporary name the downloader once used (0-note.txt.part) as symlinks to <target>, and a FIFO as
//   inbox/<id>/1-note.txt.part, then answers `planted` (and how many ids it could not, their folder made
//   by gated first);
// - `plant-dir <target dir> <from> <to>`: makes each inbox/<id> itself a symlink to <target dir>;
// - `swap <name> <target> <words>`: writes out/<name>, answers with <words> words (a reply long enough to be
//   sent in parts) naming out/<name> in `files`; once the file swap.go appears (the test writes it when
//   gated has checked the block), replaces out/<name> by a symlink to <target> (`ln -sf`), or by a FIFO when
//   <target> is `fifo`, and writes swap.done: the file checked when the block arrived is not the one
//   delivery finds;
// - `send-fifo <name>`: makes out/<name> a FIFO and names it in `files`;
// - `loop <group>`: delegates `ping` to <group>; a delegated `ping` is answered `pong`, and a `pong` that
//   comes back is delegated again as `ping` to the group that answered: a parent and child that would
//   answer each other forever (gated's hop bound stops them);
// - `dive`: delegates `dive` to its child `sub`, and so does every run that gets it: a chain that would
//   nest as deep as there are groups (gated's depth bound stops it);
// - `schedule <every> <text>`: asks for a task every <every> (`1ms`: as often as anything could fire);
// - `bad <kind>`: answers with a malformed block (`badBlocks` below: a megabyte session id, one with a NUL
//   or half a UTF-16 pair, JSON nested 100,000 deep, invalid UTF-8, thousands of files, a megabyte error,
//   absurd usage);
// - `home <name>`: reads $HOME/<name> and writes $HOME/.hostile-was-here, answering where HOME is and what
//   it read; `plant-home <target>`: makes .home in its folder a symlink to <target> (the HOME gated gives a
//   process-runtime agent) for the next run to be given;
// - anything else (the canary): `echo: <content>`.
// Every input line is appended to inputs.jsonl in the working directory.
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';

const emit = (block) => process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fifo = (path) => execFileSync('mkfifo', [path]);
const ids = (from, to) => {
  const out = [];
  for (let id = Number(from); id <= Number(to); id += 1) out.push(id);
  return out;
};

let queue = Promise.resolve();
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  const input = JSON.parse(line);
  appendFileSync('inputs.jsonl', `${line}\n`);
  queue = queue.then(() => answer(input));
});
rl.on('close', () => void queue.then(() => process.exit(0)));

const MB = 1 << 20;
const NEST = 100_000;

/** The raw output of `bad <kind>`: blocks as bytes, each followed by a good one unless it answers itself. */
function badBlocks(kind, turn) {
  const json = (block) => Buffer.from(JSON.stringify({ ...block, ...turn }));
  const good = (result) => json({ status: 'ok', result });
  switch (kind) {
    case 'session-huge':
      return [json({ status: 'ok', result: 'huge session id', newSessionId: 'S'.repeat(MB) })];
    case 'session-nul':
      return [json({ status: 'ok', result: 'nul session id', newSessionId: 'abc\u0000def' })];
    case 'session-surrogate':
      return [json({ status: 'ok', result: 'surrogate session id', newSessionId: 'ab\ud800cd' })];
    case 'deep':
      // Discarded whole: its turn is answered by the block after it.
      return [
        Buffer.from(`{"status":"ok","result":"deep","actions":${'['.repeat(NEST)}${']'.repeat(NEST)}}`),
        Buffer.from(
          `{"status":"ok","result":"deep ask","ask":{"id":"a1","tool":"Bash","input":${'{"a":'.repeat(NEST)}1${'}'.repeat(NEST)}}}`,
        ),
        good('after deep'),
      ];
    case 'utf8':
      return [
        Buffer.concat([
          Buffer.from('{"status":"ok","result":"bytes '),
          Buffer.from([0xff, 0xfe, 0xc3]),
          Buffer.from(' and a \\u0000 nul"'),
          Buffer.from(turn.turn ? `,"turn":${turn.turn}}` : '}'),
        ]),
      ];
    case 'files':
      return [
        json({
          status: 'ok',
          result: 'many files',
          files: ['x'.repeat(100_000), ...Array.from({ length: 2000 }, (_, i) => `out/f${i}.txt`)],
        }),
      ];
    case 'error':
      return [json({ status: 'error', result: 'an error', error: 'E'.repeat(MB) })];
    case 'usage':
      return [
        json({
          status: 'ok',
          result: 'absurd usage',
          usage: { input_tokens: 1e300, output_tokens: -5, cost_usd: 1e308 },
        }),
      ];
    default:
      return [good(`no bad block called ${kind}`)];
  }
}

async function answer(input) {
  const turn = typeof input.turn === 'number' ? { turn: input.turn } : {};
  const first = String(input.messages?.[0]?.content ?? '')
    .trim()
    .split(/\s+/);
  if (first[0] === 'bad') {
    for (const body of badBlocks(first[1], turn)) {
      process.stdout.write(Buffer.concat([Buffer.from(`${START}\n`), body, Buffer.from(`\n${END}\n`)]));
    }
    return;
  }
  const lines = [];
  const files = [];
  const after = [];
  const actions = [];
  for (const m of input.messages ?? []) {
    const text = String(m.content ?? '');
    const [verb, ...args] = text.trim().split(/\s+/);
    for (const a of m.attachments ?? []) lines.push(`got ${a.name} at ${a.path}`);
    for (const note of m.attachment_notes ?? []) lines.push(`note: ${note}`);
    const delegated = m.verb === 'delegate' || m.verb === 'escalate';
    if (verb === 'loop') {
      actions.push({ type: 'delegate', group: args[0], text: 'ping' });
      lines.push('looping');
    } else if (delegated && text === 'ping') {
      lines.push('pong');
    } else if (m.verb === 'delegation' && text === 'pong') {
      actions.push({ type: 'delegate', group: String(m.sender).replace(/^group:/, ''), text: 'ping' });
      lines.push('again');
    } else if (verb === 'schedule') {
      actions.push({ type: 'schedule', every: args[0], text: args.slice(1).join(' ') || 'tick' });
      lines.push('scheduling');
    } else if (text === 'dive') {
      actions.push({ type: 'delegate', group: 'sub', text: 'dive' });
      lines.push('diving');
    } else if (verb === 'plant') {
      const [target, from, to] = args;
      let skipped = 0;
      for (const id of ids(from, to)) {
        const dir = `inbox/${id}`;
        try {
          mkdirSync(dir, { recursive: true });
          for (const name of ['0-note.txt', '0-note.txt.part']) {
            rmSync(`${dir}/${name}`, { force: true });
            symlinkSync(target, `${dir}/${name}`);
          }
          rmSync(`${dir}/1-note.txt.part`, { force: true });
          fifo(`${dir}/1-note.txt.part`);
        } catch {
          // A message's folder gated already made (in a container the agent's user may not write in it).
          skipped += 1;
        }
      }
      lines.push(skipped === 0 ? 'planted' : `planted, ${skipped} taken already`);
    } else if (verb === 'plant-dir') {
      const [target, from, to] = args;
      mkdirSync('inbox', { recursive: true });
      for (const id of ids(from, to)) {
        rmSync(`inbox/${id}`, { recursive: true, force: true });
        symlinkSync(target, `inbox/${id}`);
      }
      lines.push('planted dirs');
    } else if (verb === 'swap') {
      const [name, target, words] = args;
      const path = `out/${name}`;
      mkdirSync('out', { recursive: true });
      writeFileSync(path, 'harmless\n');
      files.push(path);
      lines.push(Array.from({ length: Number(words) }, (_, i) => `w${i}`).join(' '));
      after.push(async () => {
        for (let i = 0; i < 3000 && !existsSync('swap.go'); i += 1) await sleep(10);
        rmSync('swap.go', { force: true });
        rmSync(path, { force: true });
        if (target === 'fifo') fifo(path);
        else symlinkSync(target, path);
        writeFileSync('swap.done', '');
      });
    } else if (verb === 'home') {
      const home = process.env.HOME ?? '(unset)';
      let seen = 'absent';
      try {
        seen = readFileSync(`${home}/${args[0]}`, 'utf8').trim();
      } catch {
        // not there: the HOME given is not the operator's
      }
      try {
        writeFileSync(`${home}/.hostile-was-here`, 'the hostile agent\n');
      } catch {
        // not writable
      }
      lines.push(`home=${home} ${args[0]}: ${seen}`);
    } else if (verb === 'plant-home') {
      rmSync('.home', { recursive: true, force: true });
      symlinkSync(args[0], '.home');
      lines.push('planted home');
    } else if (verb === 'send-fifo') {
      const path = `out/${args[0]}`;
      mkdirSync('out', { recursive: true });
      rmSync(path, { force: true });
      fifo(path);
      files.push(path);
      lines.push('sending a fifo');
    } else if (!m.attachments?.length) {
      lines.push(`echo: ${text}`);
    }
  }
  emit({
    status: 'ok',
    result: lines.join('\n'),
    ...(files.length ? { files } : {}),
    ...(actions.length ? { actions } : {}),
    ...turn,
  });
  for (const f of after) await f();
}
