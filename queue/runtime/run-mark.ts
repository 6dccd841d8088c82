import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';

/**
 * The mark of a process-runtime run (queue/runtime/process.ts): an environment variable every process of
 * the run inherits, even after `setsid`, and the sweep through /proc that kills what still carries the mark
 * of an ended run where no PID namespace could be had.
 */

/** The environment variable that marks every process of one run, inherited by all it starts. */
export const RUN_MARK_VAR = 'GATED_RUN_MARK';

let processNonce: string | undefined;

/**
 * A run's mark: its id, unique in this gated's database, and a nonce drawn once per gated process, so that
 * two gateways on one machine (their own databases, the same run ids) never sweep each other's runs. Drawn
 * once, not per run: a draw from the system's generator cost about 25 µs of the event loop each start.
 */
export function runMark(runId: number): string {
  processNonce ??= randomBytes(8).toString('hex');
  return `${runId}-${processNonce}`;
}

/** Marks of ended runs that the next pass over /proc looks for. */
const pendingMarks = new Set<string>();
let sweeping: Promise<void> | undefined;

/**
 * Kills every process that still carries this run's mark in its environment (Linux /proc; elsewhere only
 * the process group is reached). This catches what the process group cannot: a child that called
 * `setsid` (a new session and group) or double-forked to get away from the run.
 *
 * Reading every process's environment costs a file read per process on the machine, so it is done off
 * the event loop and coalesced: marks that arrive while a pass runs are looked for by the next pass, and
 * a burst of run ends costs a few passes, not one each. Resolves once a pass has looked for `mark`.
 */
export function sweepMarked(mark: string): Promise<void> {
  pendingMarks.add(mark);
  sweeping ??= sweepPending().finally(() => {
    sweeping = undefined;
    // A mark added between the last pass and this callback starts the next round.
    if (pendingMarks.size > 0) void sweepMarked([...pendingMarks][0]!);
  });
  return sweeping;
}

async function sweepPending(): Promise<void> {
  while (pendingMarks.size > 0) {
    const marks = new Set(pendingMarks);
    pendingMarks.clear();
    await sweepPass(marks);
  }
}

const MARK_PREFIX = Buffer.from(`\0${RUN_MARK_VAR}=`);

/** The run mark in a process's environment block, or null. */
function markIn(environ: Buffer): string | null {
  // A leading NUL makes the first variable match like the others.
  const block = Buffer.concat([Buffer.from([0]), environ]);
  const at = block.indexOf(MARK_PREFIX);
  if (at < 0) return null;
  const start = at + MARK_PREFIX.length;
  const end = block.indexOf(0, start);
  return block.toString('utf8', start, end < 0 ? block.length : end);
}

async function sweepPass(marks: ReadonlySet<string>): Promise<void> {
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d) && Number(d) !== process.pid);
  } catch {
    return;
  }
  // A few reads at a time: the pass must not fill libuv's thread pool that SQLite backups and files share.
  for (let i = 0; i < pids.length; i += 16) {
    await Promise.all(
      pids.slice(i, i + 16).map(async (pid) => {
        try {
          const mark = markIn(await readFile(`/proc/${pid}/environ`));
          if (mark !== null && marks.has(mark)) process.kill(Number(pid), 'SIGKILL');
        } catch {
          // gone already, or another user's process we cannot read
        }
      }),
    );
  }
}
