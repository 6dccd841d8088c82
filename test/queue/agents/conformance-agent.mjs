// A test agent for the runtime conformance suite: the same file runs under the process runtime and inside
// the docker image, so both runtimes are held to one behaviour. Each message's content is a directive:
//   echo TEXT      reply `echo: TEXT` (also the default for any other content)
//   stderr TEXT    write TEXT to stderr, then reply `stderr: ok`
//   exit N         write `exiting N` to stderr and exit with status N at once, no reply
//   hang           reply `hanging`, then ignore end of stdin and never exit (hard-timeout tests)
//   child          start a long-lived node child in the agent's process group, reply `child: <pid> <tag>`,
//                  <tag> an argument only that child's command line carries (its pid may be a namespace's)
//   env            reply with the sorted names of the environment variables
//   whoami         reply `uid=<uid> cwd=<cwd>` after writing a file in the working directory
//   secrets        reply with the names of the secrets received on stdin
//   silent         no reply for this message
// Every reply block carries newSessionId `conf-<sessionId or new>`; stdin EOF ends the agent (exit 0).
import { spawn } from 'node:child_process';
import { setInterval } from 'node:timers';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
let session = null;
let secrets = {};
let hanging = false;

function reply(result) {
  process.stdout.write(
    `noise before\n${START}\n${JSON.stringify({ status: 'ok', result, newSessionId: session })}\n${END}\n`,
  );
}

function handle(content) {
  const sp = content.indexOf(' ');
  const word = sp < 0 ? content : content.slice(0, sp);
  const rest = sp < 0 ? '' : content.slice(sp + 1);
  switch (word) {
    case 'stderr':
      process.stderr.write(rest + '\n');
      return reply('stderr: ok');
    case 'exit':
      process.stderr.write(`exiting ${rest}\n`);
      process.exit(Number(rest));
      return undefined;
    case 'hang':
      hanging = true;
      setInterval(() => {}, 1 << 30);
      return reply('hanging');
    case 'child': {
      const tag = `conformance-child-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', tag], {
        stdio: 'ignore',
      });
      return reply(`child: ${child.pid} ${tag}`);
    }
    case 'env':
      return reply(Object.keys(process.env).sort().join(','));
    case 'whoami':
      writeFileSync('conformance-was-here.txt', 'ok\n');
      return reply(`uid=${process.getuid?.()} cwd=${process.cwd()}`);
    case 'secrets':
      return reply(Object.keys(secrets).sort().join(','));
    case 'silent':
      return undefined;
    default:
      return reply(`echo: ${word === 'echo' ? rest : content}`);
  }
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  const input = JSON.parse(line);
  // The explicit end of input (runtimes whose stdin never reaches EOF): the same as EOF.
  if (input.type === 'end') {
    rl.close();
    process.stdin.destroy();
    return;
  }
  if (session === null) {
    session = `conf-${input.sessionId ?? 'new'}`;
    secrets = input.secrets ?? {};
  }
  for (const m of input.messages) handle(m.content);
});
rl.on('close', () => {
  if (!hanging) process.exit(0);
});
