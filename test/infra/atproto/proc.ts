/**
 * Child-process plumbing shared by the local servers the atproto network needs (PostgreSQL, Redis): a free
 * loopback port, a spawn that resolves when the server prints its ready line, and a stop by pid.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A free TCP port on 127.0.0.1 (asked of the kernel, so two suites never pick the same one by rule). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}

/** A server process started by a test. `stop` is idempotent and resolves once the process has exited. */
export interface LocalProcess {
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * Spawns `cmd` and resolves once a line of its output matches `ready`. Rejects, with the tail of its output
 * as the reason, when it exits first or is not ready within `timeoutMs`; the process is killed then.
 */
export function spawnUntilReady(
  name: string,
  cmd: string,
  args: string[],
  ready: RegExp,
  opts: SpawnOptions & { timeoutMs?: number } = {},
): Promise<LocalProcess> {
  const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start: ${why}\n${output.slice(-2000)}`));
    };
    const timer = setTimeout(
      () => fail(`not ready within ${opts.timeoutMs ?? 30_000} ms`),
      opts.timeoutMs ?? 30_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onData);
        // Keep draining so a chatty server never blocks on a full pipe.
        child.stdout?.resume();
        child.stderr?.resume();
        resolve(handle(child));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (err) => fail(err.message));
    child.once('exit', (code, signal) => fail(`exited (${signal ?? code})`));
  });
}

function handle(child: ChildProcess): LocalProcess {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  let stopping: Promise<void> | undefined;
  return {
    pid: child.pid!,
    stop() {
      stopping ??= (async () => {
        child.kill('SIGINT');
        const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(killer);
      })();
      return stopping;
    },
  };
}

/** uid and gid of a local user, or undefined when there is no such user. */
export function lookupUser(name: string): { uid: number; gid: number } | undefined {
  for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid && gid) return { uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

/** Runs a command to completion; rejects with its output when it exits non-zero. */
export function run(cmd: string, args: string[], opts: SpawnOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${out.slice(-2000)}`)),
    );
  });
}

/**
 * Starts a server in a fresh temporary folder. The folder is removed when `start` fails, and after the
 * server has stopped; `stop` of the result is idempotent.
 */
export async function inTempDir<T extends { stop(): Promise<void> }>(
  prefix: string,
  start: (dir: string) => Promise<T>,
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  let server: T;
  try {
    server = await start(dir);
  } catch (err) {
    remove();
    throw err;
  }
  let stopped: Promise<void> | undefined;
  const stopServer = server.stop.bind(server);
  return Object.assign(server, { stop: () => (stopped ??= stopServer().finally(remove)) });
}
