// An agent that works on code, for the worktree tests: it changes the repository's shared.txt to name its
// topic, waits until every agent of the test has made its change (files in $BARRIER, $AGENTS of them; no
// wait without $BARRIER), reads the file again, commits it on whatever branch its folder has checked out, and
// answers with what it read, the branch, and the subject of the commit it started from. It runs git as an agent would: in its working folder, nothing else named.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const git = (...args) =>
  execFileSync('git', ['-c', 'user.name=agent', '-c', 'user.email=agent@example.test', ...args], {
    encoding: 'utf8',
  }).trim();

const rl = createInterface({ input: process.stdin });
let answered = false;
rl.on('line', async (line) => {
  if (answered) return;
  answered = true;
  const { topic } = JSON.parse(line);
  writeFileSync('shared.txt', `changed by ${topic}\n`);
  const started = git('log', '-1', '--format=%s');
  if (process.env.BARRIER) {
    writeFileSync(join(process.env.BARRIER, topic || 'default'), '');
    const deadline = Date.now() + 60_000;
    while (readdirSync(process.env.BARRIER).length < Number(process.env.AGENTS) && Date.now() < deadline)
      await sleep(20);
  }
  const seen = readFileSync('shared.txt', 'utf8');
  git('commit', '-q', '-am', `change of ${topic}`);
  const branch = git('rev-parse', '--abbrev-ref', 'HEAD');
  // What is mounted where (a container's binds), and whether the shared git folder takes a write.
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f.length > 5 && /^\/(workspace|tmp|work|var|home|root|srv|data|mnt)\b/.test(f[4]))
    .map((f) => `${f[4]} ${f[5].split(',')[0]}`);
  let sharedWritable = null;
  if (process.env.GIT_ALTERNATE_OBJECT_DIRECTORIES) {
    try {
      writeFileSync(join(process.env.GIT_ALTERNATE_OBJECT_DIRECTORIES, '..', 'probe'), 'x');
      sharedWritable = true;
    } catch {
      sharedWritable = false;
    }
  }
  const result = JSON.stringify({ seen, branch, started, cwd: process.cwd(), mounts, sharedWritable });
  process.stdout.write(`${START}\n${JSON.stringify({ status: 'ok', result })}\n${END}\n`);
});
rl.on('close', () => process.exit(0));
