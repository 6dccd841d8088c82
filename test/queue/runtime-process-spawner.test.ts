import { spawn } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import { sharedSpawner, SPAWNER_FILE } from '../../queue/runtime/spawner.js';
import { packageFile } from '../../core/paths.js';
import { tempDir } from '../helpers/db.js';
import { sleepers, until } from '../helpers/process.js';

/** The parent pid of a live process, or null once it is gone. */
function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses, the last ')' ends it.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

/** The chain of parents of `pid`, nearest first, up to pid 1. */
function ancestors(pid: number): number[] {
  const chain: number[] = [];
  for (let p = parentOf(pid); p !== null && p > 1; p = parentOf(p)) chain.push(p);
  return chain;
}

const alive = (pid: number) => parentOf(pid) !== null;
const sleepTag = () => String(3000 + Math.floor(Math.random() * 999_000));
const reap = (n: string) => {
  for (const pid of sleepers(n)) process.kill(pid, 'SIGKILL');
};
const spec = (runId: number) => ({ runId, group: 'g', topic: '', groupDir: join(tempDir(), 'g') });

/** A pino logger whose lines the test can read. */
function recordingLog() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'warn' }, { write: (s: string) => lines.push(JSON.parse(s)) });
  return { log, lines };
}

describe('process runtime: agents start from the spawner, not from gated', () => {
  it('an agent is the spawner’s child, and the spawner holds none of gated’s environment', async () => {
    const n = sleepTag();
    process.env.GATED_SPAWNER_TEST_SECRET = 'must-not-leak';
    try {
      const runtime = createProcessRuntime({ cmd: `echo up; exec sleep ${n}` });
      const handle = await runtime.start(spec(1));
      await new Promise<void>((resolve) => handle.stdout.once('data', () => resolve()));
      const spawner = (await sharedSpawner())!;
      // `up` is written before the shell execs `sleep`: wait for the sleep itself, not only its first line.
      const sleeper = await until(() => sleepers(n)[0], 5_000, 'the agent to exec sleep');
      const chain = ancestors(sleeper);
      // The namespace's processes, then the spawner, then gated (this test process).
      expect(chain).toContain(spawner.pid);
      expect(chain.indexOf(process.pid)).toBe(chain.indexOf(spawner.pid!) + 1);
      const environ = readFileSync(`/proc/${spawner.pid}/environ`, 'utf8').split('\0').filter(Boolean);
      // Node's own variables of the IPC channel aside (the spawner does not pass them on).
      const names = environ.map((v) => v.split('=')[0]!).filter((v) => !v.startsWith('NODE_CHANNEL_'));
      expect(names.sort()).toEqual(['HOME', 'LANG', 'PATH']);
      handle.kill();
      expect((await handle.exited).signal).toBe('SIGKILL');
      await until(() => sleepers(n).length === 0, 5000, `sleep ${n} to be gone`);
    } finally {
      delete process.env.GATED_SPAWNER_TEST_SECRET;
      reap(n);
    }
  });

  it('hands gated one socket for the agent’s stdin and stdout, which still carries output after end of stdin', async () => {
    // fd 0 and fd 1 of the agent's processes are the same socket; output written after gated closed its
    // side (half-close) still arrives, and the agent saw the end of its input.
    const runtime = createProcessRuntime({
      cmd: 'readlink /proc/self/fd/0 /proc/self/fd/1; read x; echo "got $x"; read y || echo "end of stdin"',
    });
    const handle = await runtime.start(spec(7));
    let out = '';
    handle.stdout.on('data', (d: Buffer) => (out += String(d)));
    expect(handle.write('hello\n')).toBe(true);
    await until(() => out.includes('got hello'), 5000, 'the answer to the first line');
    handle.closeStdin();
    expect((await handle.exited).code).toBe(0);
    const [fd0, fd1, ...rest] = out.split('\n');
    expect(fd0).toMatch(/^socket:\[\d+\]$/);
    expect(fd1).toBe(fd0);
    expect(rest).toEqual(['got hello', 'end of stdin', '']);
  });

  it('a spawner killed mid-run ends that run as killed, kills its agent, and the next start gets a new one', async () => {
    const n = sleepTag();
    try {
      // A spawner of this test's own (one per script file), reporting to this test's log.
      const file = join(tempDir(), 'spawner.mjs');
      copyFileSync(SPAWNER_FILE, file);
      const { log, lines } = recordingLog();
      const runtime = createProcessRuntime({ cmd: `echo up; exec sleep ${n}`, log, spawnerFile: file });
      const handle = await runtime.start(spec(2));
      await new Promise<void>((resolve) => handle.stdout.once('data', () => resolve()));
      const first = (await sharedSpawner(log, file))!;
      process.kill(first.pid!, 'SIGKILL');
      const exit = await handle.exited;
      expect(exit).toMatchObject({ code: null, signal: 'SIGKILL' });
      expect(exit.stderrTail).toContain('spawner exited');
      await until(() => sleepers(n).length === 0, 5000, `sleep ${n} to be gone`);
      expect(lines.map((l) => l.msg)).toContain('the spawner exited');

      const after = createProcessRuntime({ cmd: 'exit 0', log, spawnerFile: file });
      expect((await (await after.start(spec(3))).exited).code).toBe(0);
      const second = (await sharedSpawner(log, file))!;
      expect(second.pid).not.toBe(first.pid);
      expect(second.alive).toBe(true);
    } finally {
      reap(n);
    }
  });

  it('without a spawner that starts, gated spawns agents itself and says so once', async () => {
    const broken = join(tempDir(), 'broken-spawner.mjs');
    writeFileSync(broken, 'process.exit(7);\n');
    const { log, lines } = recordingLog();
    const runtime = createProcessRuntime({ cmd: 'echo "$1 ok"; exit 4', log, spawnerFile: broken });
    for (const runId of [4, 5]) {
      const handle = await runtime.start(spec(runId));
      let out = '';
      handle.stdout.on('data', (d: Buffer) => (out += String(d)));
      expect((await handle.exited).code).toBe(4);
      expect(out).toBe(' ok\n');
    }
    const fellBack = lines.filter((l) => String(l.msg).startsWith('cannot start the spawner'));
    expect(fellBack).toHaveLength(1);
    expect(fellBack[0]).toMatchObject({ file: broken });
    // The broken spawner's own exit is not reported as a death mid-run.
    expect(lines.map((l) => l.msg)).not.toContain('the spawner exited');
  });

  it('reports a program that cannot start as the spawn error, and lives on', async () => {
    const spawner = (await sharedSpawner())!;
    const failed = spawner.start({
      bin: join(tempDir(), 'no-such-program'),
      args: [],
      cwd: tempDir(),
      env: { PATH: process.env.PATH! },
      markVar: 'GATED_RUN_MARK',
      drainMs: 2000,
    });
    await expect(failed).rejects.toMatchObject({ code: 'ENOENT' });
    expect(spawner.alive).toBe(true);
    const runtime = createProcessRuntime({ cmd: 'exit 5' });
    expect((await (await runtime.start(spec(6))).exited).code).toBe(5);
  });
});

describe('a start gated cannot receive (its descriptors exhausted)', () => {
  it('is given up when its run says so, and the spawner kills the agent it had started', async () => {
    const n = sleepTag();
    // A stand-in for gated with a low descriptor limit: it starts the real spawner, fills every descriptor
    // left, then asks for an agent. Node drops a handle the receiver cannot take, so the agent's socket
    // never arrives; the start is abandoned (as a run's hard timeout does) and must not leave the agent.
    const parent = join(tempDir(), 'emfile-parent.mts');
    writeFileSync(
      parent,
      `import { openSync, closeSync } from 'node:fs';
import { Spawner } from ${JSON.stringify(SPAWNER_FILE.replace(/\.mjs$/, '.ts'))};
const s = new Spawner();
await s.ready;
const fds: number[] = [];
try { for (;;) fds.push(openSync('/dev/null', 'r')); } catch {}
const abort = new AbortController();
const started = s.start({ bin: 'sh', args: ['-c', 'exec sleep ${n}'], cwd: '/', env: { PATH: process.env.PATH! },
  markVar: 'GATED_RUN_MARK', drainMs: 100 }, abort.signal);
const outcome = started.then(() => 'started', (e: Error) => e.message);
setTimeout(() => abort.abort(), 1500);
const result = await outcome;
for (const fd of fds) closeSync(fd);
process.stdout.write(JSON.stringify({ result, filled: fds.length, spawner: s.pid }) + '\\n');
s.close();
`,
    );
    try {
      const child = spawn(
        'sh',
        ['-c', 'ulimit -n 64; exec "$0" --import tsx "$1"', process.execPath, parent],
        { stdio: ['ignore', 'pipe', 'inherit'], cwd: packageFile() },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += String(d)));
      await new Promise((resolve) => child.once('exit', resolve));
      const report = JSON.parse(out.trim()) as { result: string; filled: number; spawner: number };
      expect(report.filled).toBeGreaterThan(0);
      expect(report.result).toBe('the start was abandoned');
      await until(() => !alive(report.spawner) && sleepers(n).length === 0, 5000, 'agent and spawner gone');
    } finally {
      reap(n);
    }
  });
});

describe('the spawner dies with gated, and so do the agents it started', () => {
  it('even when gated dies while the spawner waits for it to take a handle', async () => {
    const n = sleepTag();
    // A stand-in for gated that starts the real spawner, asks for one agent and, as the agent's stdin
    // arrives (its stdout is then on its way, unacknowledged), kills itself: Node's channel then never
    // says 'disconnect' to the spawner.
    const parent = join(tempDir(), 'dying-parent.mjs');
    writeFileSync(
      parent,
      `import { spawn } from 'node:child_process';
const s = spawn(process.execPath, [${JSON.stringify(SPAWNER_FILE)}], { stdio: ['pipe', 'ignore', 'inherit', 'ipc'] });
process.stdout.write(s.pid + '\\n');
s.on('message', (m) => {
  if (m.t === 'ready')
    s.send({ t: 'spawn', id: 1, bin: 'sh', args: ['-c', 'exec sleep ${n}'], cwd: '/', env: { PATH: process.env.PATH },
      markVar: 'GATED_RUN_MARK', tailBytes: 100, drainMs: 100 });
  else if (m.t === 'stdin') process.kill(process.pid, 'SIGKILL');
});
`,
    );
    try {
      const child = spawn(process.execPath, [parent], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += String(d)));
      await new Promise((resolve) => child.once('exit', resolve));
      const spawnerPid = Number(out.trim());
      expect(spawnerPid).toBeGreaterThan(0);
      await until(() => !alive(spawnerPid) && sleepers(n).length === 0, 5000, 'spawner and agent gone');
    } finally {
      reap(n);
    }
  });

  it('closing its channel kills its agents’ groups and ends it', async () => {
    const n = sleepTag();
    try {
      const { Spawner } = await import('../../queue/runtime/spawner.js');
      const own = new Spawner();
      expect(await own.ready).toBe(true);
      const started = await own.start({
        bin: 'sh',
        args: ['-c', `echo up; exec sleep ${n}`],
        cwd: tempDir(),
        env: { PATH: process.env.PATH! },
        markVar: 'GATED_RUN_MARK',
        drainMs: 2000,
      });
      await new Promise<void>((resolve) => started.stdout.once('data', () => resolve()));
      // The shell says "up" before it execs sleep: the sleeper shows up a moment after the line.
      await until(() => sleepers(n).length === 1, 5000, 'the agent running');
      own.close();
      await until(() => !alive(own.pid!) && sleepers(n).length === 0, 5000, 'spawner and agent gone');
      started.stdin.destroy();
      started.stdout.destroy();
    } finally {
      reap(n);
    }
  });
});

describe('the spawner with no descriptor left', () => {
  it('cannot start: ready says so, and the process that asked goes on (no unhandled error ends it)', async () => {
    // A process of its own under `ulimit -n 64` opens files until EMFILE, then starts a spawner: the
    // spawn fails with no stdio at all. Before, that 'error' had no listener yet and ended the process.
    const script = [
      `import { openSync } from 'node:fs';`,
      `const { Spawner } = await import(${JSON.stringify(packageFile('queue', 'runtime', 'spawner.ts'))});`,
      `const held = [];`,
      `try { for (;;) held.push(openSync('/dev/null', 'r')); } catch (err) { if (err.code !== 'EMFILE') throw err; }`,
      `const s = new Spawner();`,
      `console.log('ready', await s.ready);`,
    ].join('\n');
    const child = spawn(
      'sh',
      ['-c', 'ulimit -n 64; exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, script],
      { stdio: ['ignore', 'pipe', 'pipe'], cwd: packageFile() },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += String(d)));
    child.stderr.on('data', (d: Buffer) => (err += String(d)));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(err).not.toMatch(/Unhandled 'error' event/);
    expect({ code, out }).toEqual({ code: 0, out: 'ready false\n' });
  });
});
