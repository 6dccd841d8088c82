import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import type { Logger } from '../../core/log.js';
import { packageFile } from '../../core/paths.js';
import { STDERR_TAIL_BYTES } from './types.js';

/**
 * gated's side of the spawner (queue/runtime/spawner.mjs): a small Node process started once that starts
 * the process runtime's agents, so that gated itself never forks (a fork's cost grows with gated's heap,
 * and it is paid on the event loop). The agent's stdin and stdout reach gated as sockets passed over the
 * IPC channel; its stderr stays with the spawner, which reports the tail with the exit. At the exit the
 * spawner also kills the agent's process group and sweeps its run mark, so none of that is gated's work.
 */

/** What to start: argv, working directory and the whole environment (nothing else is inherited). */
export interface SpawnRequest {
  bin: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /**
   * The variable of `env` whose value marks every process of the run: swept at its exit. None: no sweep
   * (a run in a PID namespace of its own, which the kernel empties when its first process ends).
   */
  markVar?: string;
  /** How long the exit report may wait for stderr to close after the exit. */
  drainMs: number;
  /**
   * The agent's own HOME (queue/runtime/home.ts), made or checked just before the start by whoever
   * starts it: a directory private to gated's user, whatever was at that path replaced, the folder `cwd`
   * made when missing. The check is the spawner's own file work, off gated's event loop.
   */
  home?: string;
  /** The agent's own user under a root gated: the folder `cwd` and the HOME are handed to it. */
  owner?: { uid: number; gid: number };
  /**
   * The command writes its output on its fd 0 itself (`exec 1>&0`: fd 0 is a socket, both ways): its fd 1
   * is /dev/null, and its stdin socket comes back as both `stdin` and `stdout`, one handle instead of two.
   */
  stdoutOnStdin?: boolean;
}

/** How a spawned process ended, as the spawner saw it. */
export interface SpawnedExit {
  code: number | null;
  signal: string | null;
  stderrTail: string;
  /** How long after the exit the report waited for stderr (part of the drain already spent). */
  waitedMs: number;
}

/**
 * A process the spawner started: its own process group (pid), its stdin and stdout (one socket when it was
 * asked `stdoutOnStdin`), its end.
 */
export interface Spawned {
  pid: number;
  stdin: Socket;
  stdout: Socket;
  /** Never rejects: a spawner that dies ends its runs as killed (their groups are killed by gated). */
  exit: Promise<SpawnedExit>;
}

/** The spawner's script, run by bare `node`. */
export const SPAWNER_FILE = packageFile('queue', 'runtime', 'spawner.mjs');

// How long the spawner may take to say it is ready before gated gives up on it.
const READY_MS = 10_000;

interface Pending {
  resolve(s: Spawned): void;
  reject(err: Error): void;
  pid?: number;
  stdin?: Socket;
  spawned?: Spawned;
  exited?(e: SpawnedExit): void;
}

type Message =
  | { t: 'ready' }
  | { t: 'stdin'; id: number; pid: number }
  | { t: 'stdout'; id: number }
  | { t: 'stdio'; id: number; pid: number }
  | { t: 'failed'; id: number; code: string | null; message: string }
  | ({ t: 'exit'; id: number } & SpawnedExit);

/** The spawner's own environment: what a Node process needs, nothing of gated's (tokens live there). */
function spawnerEnv(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: process.env.LANG ?? 'C.UTF-8',
  };
}

/**
 * One spawner process. `ready` resolves true once it answered, false when it could not be started (the
 * caller falls back to spawning itself); after a later death of the process, `alive` is false and its
 * live runs end as killed.
 */
export class Spawner {
  readonly ready: Promise<boolean>;
  private readonly child: ChildProcess;
  private readonly runs = new Map<number, Pending>();
  private nextId = 1;
  private up = false;
  private gone = false;
  private stderr = '';

  constructor(
    private readonly log?: Logger,
    file: string = SPAWNER_FILE,
  ) {
    // No execArgv (gated may run under a loader) and gated's environment left out. A process group of its
    // own: a Ctrl-C meant for gated (which lets runs finish first) must not kill the spawner and its runs
    // with it; the spawner ends when gated does.
    this.child = spawn(process.execPath, [file], {
      detached: true,
      // stdin: a pipe never written to, whose end tells the spawner that gated is gone.
      stdio: ['pipe', 'ignore', 'pipe', 'ipc'],
      env: spawnerEnv(),
      serialization: 'json',
    });
    // The 'error' listener goes on before anything else: with the descriptors exhausted (EMFILE) the spawn
    // fails on the next tick with no stdio at all, and a TypeError on the missing stderr here would leave
    // that 'error' without a listener, which ends gated (a flood of connections did).
    this.child.on('message', (m: Message, handle?: Socket) => this.onMessage(m, handle));
    this.ready = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.log?.warn({ ms: READY_MS }, 'the spawner did not answer; killing it');
        this.child.kill('SIGKILL');
      }, READY_MS).unref();
      this.child.once('message', () => {
        clearTimeout(timer);
        this.up = true;
        if (this.runs.size === 0) this.idle();
        resolve(true);
      });
      this.child.on('error', (err) => {
        this.log?.warn({ err: err.message }, 'the spawner failed');
        // A process that never started (no 'exit' follows).
        if (this.child.pid === undefined) {
          clearTimeout(timer);
          this.gone = true;
          resolve(false);
        }
      });
      this.child.once('exit', (code, signal) => {
        clearTimeout(timer);
        this.onGone(code, signal);
        resolve(false);
      });
    });
    this.child.stderr?.on('data', (d: Buffer) => (this.stderr = (this.stderr + String(d)).slice(-4000)));
    // Neither the process nor its stderr keeps gated alive; the channel does while an answer is awaited.
    this.child.unref();
    (this.child.stdin as Socket | null)?.unref();
    (this.child.stderr as Socket | null)?.unref();
  }

  /** True while the process answers: starts may be asked of it. */
  get alive(): boolean {
    return this.up && !this.gone && this.child.connected;
  }

  /** The spawner's pid (tests look for it). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /**
   * Starts a process; rejects like `spawn` would (ENOENT…), when the spawner is gone, when `signal` aborts
   * first (the spawner then kills what it started for this request), or when the process ended before its
   * sockets reached gated (a handle gated could not take, its descriptors exhausted, is dropped by Node).
   */
  start(req: SpawnRequest, signal?: AbortSignal): Promise<Spawned> {
    if (!this.alive) return Promise.reject(new Error('the spawner is gone'));
    if (signal?.aborted) return Promise.reject(new Error('the start was abandoned'));
    const id = this.nextId++;
    return new Promise<Spawned>((resolve, reject) => {
      const abandon = () => this.abandon(id);
      signal?.addEventListener('abort', abandon, { once: true });
      const settled = () => signal?.removeEventListener('abort', abandon);
      this.runs.set(id, {
        resolve: (s) => (settled(), resolve(s)),
        reject: (e) => (settled(), reject(e)),
      });
      this.busy();
      this.child.send({ t: 'spawn', id, ...req, tailBytes: STDERR_TAIL_BYTES }, (err) => {
        if (err === null) return;
        this.end(id);
        reject(err);
      });
    });
  }

  /** Gives up on a start still pending: the spawner kills its process (now, or once it has started). */
  private abandon(id: number): void {
    const run = this.runs.get(id);
    if (run === undefined || run.spawned !== undefined) return;
    this.end(id);
    if (run.pid !== undefined) killGroup(run.pid);
    run.stdin?.destroy();
    if (this.child.connected) this.child.send({ t: 'kill', id }, () => {});
    run.reject(new Error('the start was abandoned'));
  }

  /** Closes the channel: the spawner kills what it started and exits. For tests and shutdown. */
  close(): void {
    this.child.stdin?.end();
    if (this.child.connected) this.child.disconnect();
  }

  private onMessage(m: Message, handle: Socket | undefined): void {
    if (m.t === 'ready') return;
    const run = this.runs.get(m.id);
    if (run === undefined) {
      handle?.destroy();
      return;
    }
    if (m.t === 'stdin') {
      run.pid = m.pid;
      run.stdin = handle;
    } else if (m.t === 'stdout' || m.t === 'stdio') {
      if (m.t === 'stdio') [run.pid, run.stdin] = [m.pid, handle];
      const exit = new Promise<SpawnedExit>((resolve) => (run.exited = resolve));
      run.spawned = { pid: run.pid!, stdin: run.stdin!, stdout: handle!, exit };
      run.resolve(run.spawned);
    } else if (m.t === 'failed') {
      this.end(m.id);
      run.reject(Object.assign(new Error(m.message), { code: m.code ?? undefined }));
    } else {
      this.end(m.id);
      if (run.exited) {
        run.exited({ code: m.code, signal: m.signal, stderrTail: m.stderrTail, waitedMs: m.waitedMs });
        return;
      }
      // Its exit came but its sockets never did: Node drops a handle the receiver cannot take (EMFILE).
      run.stdin?.destroy();
      run.reject(new Error('the agent exited before its sockets reached gated (out of descriptors?)'));
    }
  }

  private end(id: number): void {
    this.runs.delete(id);
    if (this.runs.size === 0) this.idle();
  }

  // The channel keeps gated's event loop alive only while a start or an exit report is awaited.
  private busy(): void {
    this.child.channel?.ref();
  }

  private idle(): void {
    this.child.channel?.unref();
  }

  /** The spawner is gone: its runs' agents are killed from here and end as killed; starts fail. */
  private onGone(code: number | null, signal: string | null): void {
    this.gone = true;
    if (this.up || this.runs.size > 0) {
      this.log?.warn({ code, signal, stderr: this.stderr.slice(-1000) }, 'the spawner exited');
    }
    for (const [id, run] of this.runs) {
      this.runs.delete(id);
      if (run.pid !== undefined) killGroup(run.pid);
      run.reject(new Error('the spawner exited'));
      run.stdin?.destroy();
      run.exited?.({
        code: null,
        signal: 'SIGKILL',
        stderrTail: 'gated: the spawner exited; the agent was killed',
        waitedMs: 0,
      });
    }
  }
}

/** SIGKILL to a process group; a group that is already gone is fine. */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group has no process left
  }
}

const shared = new Map<string, Promise<Spawner | null>>();

/**
 * The spawner of this gated process (one per script file), started on first use and again after it died;
 * null when one cannot be started, and from then on (logged once): the caller spawns agents itself.
 */
export async function sharedSpawner(log?: Logger, file: string = SPAWNER_FILE): Promise<Spawner | null> {
  let current = shared.get(file);
  if (current === undefined) shared.set(file, (current = launch(log, file)));
  const s = await current;
  if (s === null || s.alive) return s;
  // It came up, then died: the first caller to notice starts another.
  if (shared.get(file) === current) shared.set(file, launch(log, file));
  return shared.get(file)!;
}

async function launch(log: Logger | undefined, file: string): Promise<Spawner | null> {
  const s = new Spawner(log, file);
  if (await s.ready) return s;
  log?.warn({ file }, 'cannot start the spawner; gated spawns agents itself from now on');
  return null;
}
