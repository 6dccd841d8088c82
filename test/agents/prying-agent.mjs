// A process-runtime agent that tries to get at gated itself (test/gated/process-user.test.ts). Its first
// line's message is `pry <gated pid> <database> <.env> <data folder>`; it tries, in order: to unmount its
// namespace's /proc (to see the machine's), to read gated's environment, the database and the .env, and to
// list the data folder, and answers with one JSON object saying what each attempt got (the bytes it read,
// or the error's code), with its own uid and a file it wrote in its folder to show it ran there.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

function attempt(fn) {
  try {
    return { got: String(fn()).slice(0, 4000) };
  } catch (err) {
    return { error: err.code ?? String(err.message).slice(0, 200) };
  }
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const input = JSON.parse(line);
  const text = input.messages?.at(-1)?.content ?? '';
  const [, pid, db, env, data] = text.split(' ');
  const umount = spawnSync('umount', ['/proc'], { encoding: 'utf8' });
  writeFileSync('pried.txt', 'the agent was here\n');
  const report = {
    uid: process.getuid(),
    umount: { status: umount.status, stderr: umount.stderr.trim().slice(0, 200) },
    environ: attempt(() => readFileSync(`/proc/${pid}/environ`, 'latin1')),
    db: attempt(() => readFileSync(db, 'latin1')),
    dotenv: attempt(() => readFileSync(env, 'utf8')),
    data: attempt(() => readdirSync(data).join(',')),
    wrote: readFileSync('pried.txt', 'utf8'),
  };
  process.stdout.write(
    `---GATED_OUTPUT_START---\n${JSON.stringify({ status: 'ok', result: JSON.stringify(report) })}\n---GATED_OUTPUT_END---\n`,
  );
  break;
}
