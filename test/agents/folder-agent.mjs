// The agents of the nested-folder campaign (bench/folders.ts, docs/SECURITY.md "Folders"): a parent's agent
// that attacks where its child's folder used to be, inside its own, and a child's agent that says where it
// runs. Per stdin line it answers every message:
// - `link <name> <target>`: makes <name> in its folder a symlink to <target> (a folder there is moved to
//   <name>.real first, as `mv c c.real; ln -s ../secret c`), answers `linked <name>`;
// - `flip <name> <target>,<target>…`: moves a folder at <name> to <name>.real, answers `flipping <name>`, then, until the file flip.stop appears in its
//   folder, makes <name> a folder, then a symlink to the next target, then a folder again, as fast as it
//   can; every 100 flips or so (and at the end) it replaces flips.txt with the count so far. Its stdin may close
//   meanwhile: the agent exits only when the flipping is done;
// - `where <n>`: writes mark-<n>.txt in its working directory and answers
//   `where <n> <ino of .> <what this process works in>`: the root of the /workspace mount as the kernel
//   has it (/proc/self/mountinfo) in a container, else its working directory (getcwd);
// - anything else: `echo: <content>`.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const emit = (block) => process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);

let queue = Promise.resolve();
let flipping = Promise.resolve();
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  const input = JSON.parse(line);
  queue = queue.then(() => answer(input));
});
rl.on('close', () => void Promise.all([queue, flipping]).then(() => process.exit(0)));

let moved = 0;
/**
 * Removes what is at `name`, never following it: a link or a file is unlinked, an empty folder removed, and
 * a folder something wrote into meanwhile moved aside (`<name>.full-<n>`).
 */
function clear(name) {
  const st = lstatSync(name, { throwIfNoEntry: false });
  if (!st) return;
  if (!st.isDirectory()) return unlinkSync(name);
  try {
    rmdirSync(name);
  } catch (err) {
    if (err.code !== 'ENOTEMPTY') throw err;
    renameSync(name, `${name}.full-${++moved}`);
  }
}

async function flip(name, targets) {
  let flips = 0;
  let written = 0;
  while (!existsSync('flip.stop')) {
    for (const target of targets) {
      try {
        clear(name);
        mkdirSync(name);
        clear(name);
        symlinkSync(target, name);
        flips += 1;
      } catch {
        // gated (or a run) made something at the name meanwhile: the next flip clears it.
      }
    }
    if (flips - written >= 100) writeCount((written = flips));
    // Lets stdin be read between bursts of ten.
    if (flips % (10 * targets.length) === 0) await new Promise((r) => setImmediate(r));
  }
  clear(name);
  writeCount(flips);
}

/**
 * Replaces flips.txt whole: the campaign reads it while the agent flips, and a plain write truncates the
 * file before it writes, so a read between the two saw an empty file (a count of 0).
 */
function writeCount(flips) {
  writeFileSync('flips.txt.next', String(flips));
  renameSync('flips.txt.next', 'flips.txt');
}

/** What this process works in, as the kernel resolved it. */
function workspaceRoot() {
  if (process.cwd() !== '/workspace') return process.cwd();
  const line = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((l) => l.split(' ')[4] === '/workspace');
  return line ? line.split(' ')[3] : '(no /workspace mount)';
}

async function answer(input) {
  const turn = typeof input.turn === 'number' ? { turn: input.turn } : {};
  const content = String(input.messages?.at(-1)?.content ?? '').trim();
  const [cmd, ...args] = content.split(/\s+/);
  let result;
  if (cmd === 'link') {
    const [name, target] = args;
    if (lstatSync(name, { throwIfNoEntry: false })?.isDirectory()) renameSync(name, `${name}.real`);
    clear(name);
    symlinkSync(target, name);
    result = `linked ${name}`;
  } else if (cmd === 'flip') {
    const [name, targets] = args;
    if (lstatSync(name, { throwIfNoEntry: false })?.isDirectory()) renameSync(name, `${name}.real`);
    flipping = flip(name, targets.split(','));
    result = `flipping ${name}`;
  } else if (cmd === 'where') {
    writeFileSync(`mark-${args[0]}.txt`, `written by the run of message ${args[0]}\n`);
    result = `where ${args[0]} ${statSync('.').ino} ${workspaceRoot()}`;
  } else {
    result = `echo: ${content}`;
  }
  emit({ status: 'ok', result, ...turn });
}
