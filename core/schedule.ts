import { Cron } from 'croner';
import { formatDuration, parseDuration } from './duration.js';
import { UsageError } from './errors.js';

/**
 * When scheduled tasks are due (docs/TASKS.md). Pure computation on epoch milliseconds: the scheduler, the
 * CLI and the agents' `schedule` action all ask these functions, so a task is due at the same instants
 * whoever added it. Cron patterns are parsed and stepped by croner (5 fields, in the configured time zone,
 * daylight-saving changes included); `every` stays on the grid `anchor + k·interval`.
 */

/** How a task repeats: a cron pattern, a fixed interval, or once at an instant. */
export type TaskKind = 'cron' | 'every' | 'at';

/** What the due-time functions need to know about a task. */
export interface Schedule {
  kind: TaskKind;
  /** cron: the 5-field pattern; every: a duration (`1h30m`); at: a UTC ISO instant. */
  spec: string;
  /** every: the grid origin (the add time), epoch ms; ignored by the other kinds. */
  anchorMs: number;
}

/** The due times a firing at `now` covers. */
export interface DueRange {
  /** The latest due time at or before now: the one this firing answers. */
  latest: number;
  /** How many due times (from the stored next one to `latest`) this one firing stands for; ≥ 1. */
  count: number;
  /** The first due time after now, or null when the task is finished (`at`). */
  next: number | null;
}

// Stepping a cron pattern over a long outage one due time at a time is bounded: past this many, the
// count is reported as this many and the latest due time is found directly.
const MAX_STEPS = 10_000;

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * An instant as people in the chat read it: `2026-12-02 11:00 Europe/Berlin` (GATED_TZ; minutes, the
 * zone named), for notices that say until when.
 */
export function wallTime(ms: number, tz: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone: tz,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(ms);
  const p = (t: Intl.DateTimeFormatPartTypes) => parts.find((x) => x.type === t)?.value ?? '';
  return `${p('year')}-${p('month')}-${p('day')} ${p('hour')}:${p('minute')} ${tz}`;
}

/** Throws a UsageError unless `tz` is an IANA time zone this Node knows (`Europe/Berlin`, `UTC`). */
export function checkTimeZone(tz: string): string {
  // The default needs no check, nor ICU's zone data loaded for it (about 10 ms of every start).
  if (tz === 'UTC') return tz;
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return tz;
  } catch {
    throw new UsageError(`unknown time zone '${tz}' (use an IANA name such as UTC or Europe/Berlin)`);
  }
}

function cronOf(pattern: string, tz: string): Cron {
  try {
    // No callback: croner only computes times, it starts no timer of its own.
    return new Cron(pattern, { timezone: tz, mode: '5-part' });
  } catch (err) {
    throw new UsageError(`bad cron pattern '${pattern}': ${(err as Error).message.replace(/^\w+: /, '')}`);
  }
}

/** An `at` spec as epoch ms: an ISO time; one without an offset is read in `tz`. */
function instantOf(text: string, tz: string): number {
  if (!ISO_RE.test(text)) {
    throw new UsageError(
      `bad time '${text}': write an ISO time such as 2026-12-24T18:00 or 2026-12-24T17:00Z`,
    );
  }
  if (/(Z|[+-]\d{2}:\d{2})$/.test(text)) {
    const ms = Date.parse(text);
    if (Number.isNaN(ms)) throw new UsageError(`bad time '${text}'`);
    return ms;
  }
  const when = new Cron(text, { timezone: tz }).nextRun(new Date(0));
  if (!when) throw new UsageError(`bad time '${text}'`);
  return when.getTime();
}

/**
 * Checks a task's schedule as written by an operator or an agent and returns it in stored form with its
 * first due time: cron patterns as given (5 fields), durations normalized (`90m` → `1h30m`), `at` times as
 * UTC ISO. Refuses an `at` time that is not in the future. Throws UsageError naming the problem.
 */
export function planSchedule(
  kind: TaskKind,
  text: string,
  now: number,
  tz: string,
): { spec: string; anchorMs: number; first: number } {
  const spec = text.trim();
  switch (kind) {
    case 'cron': {
      const first = cronOf(spec, tz).nextRun(new Date(now));
      if (!first) throw new UsageError(`cron pattern '${spec}' never fires`);
      return { spec, anchorMs: now, first: first.getTime() };
    }
    case 'every': {
      const ms = parseDuration(spec);
      return { spec: formatDuration(ms), anchorMs: now, first: now + ms };
    }
    case 'at': {
      const at = instantOf(spec, tz);
      if (at <= now) throw new UsageError(`time '${spec}' is not in the future`);
      return { spec: new Date(at).toISOString(), anchorMs: now, first: at };
    }
  }
}

/**
 * The shortest gap between two due times of a schedule, in ms, or null for a task that fires once (`at`):
 * the interval of `every`, and for `cron` the smallest gap among its next 100 due times (a pattern such as
 * `0,1 * * * *` fires twice a minute apart every hour). What an agent's `schedule` is bounded by.
 */
export function shortestGap(kind: TaskKind, spec: string, now: number, tz: string): number | null {
  switch (kind) {
    case 'every':
      return parseDuration(spec.trim());
    case 'at':
      return null;
    case 'cron': {
      const cron = cronOf(spec.trim(), tz);
      let prev = cron.nextRun(new Date(now))?.getTime();
      let gap = Infinity;
      for (let i = 0; i < 100 && prev !== undefined; i++) {
        const next = cron.nextRun(new Date(prev))?.getTime();
        if (next === undefined) break;
        gap = Math.min(gap, next - prev);
        prev = next;
      }
      return gap === Infinity ? null : gap;
    }
  }
}

/** The first due time strictly after `after`, or null when there is none (`at`, once passed). */
export function nextDue(s: Schedule, after: number, tz: string): number | null {
  switch (s.kind) {
    case 'cron':
      return cronOf(s.spec, tz).nextRun(new Date(after))?.getTime() ?? null;
    case 'every': {
      const iv = parseDuration(s.spec);
      const k = Math.max(1, Math.floor((after - s.anchorMs) / iv) + 1);
      return s.anchorMs + k * iv;
    }
    case 'at': {
      const at = Date.parse(s.spec);
      return at > after ? at : null;
    }
  }
}

/**
 * The due times a firing at `now` covers, given the stored next due time `due` (≤ now). Everything missed
 * since `due` (gated was down, or busy) is coalesced into this one firing: `latest` is the last due time at
 * or before now and `count` how many there were; `next` is strictly after now, so a firing never repeats.
 */
export function dueRange(s: Schedule, due: number, now: number, tz: string): DueRange {
  switch (s.kind) {
    case 'every': {
      const iv = parseDuration(s.spec);
      const grid = s.anchorMs + Math.floor((now - s.anchorMs) / iv) * iv;
      const from = Math.max(due, s.anchorMs + iv);
      const count = grid >= from ? Math.floor((grid - from) / iv) + 1 : 1;
      // A stored time off the grid (an operator's edit) fires as itself; the next one is on the grid again.
      return { latest: Math.max(grid, due), count, next: grid + iv };
    }
    case 'cron': {
      const cron = cronOf(s.spec, tz);
      let latest = due;
      let count = 1;
      for (;;) {
        const n = cron.nextRun(new Date(latest))?.getTime();
        if (n === undefined || n > now) break;
        latest = n;
        if (++count >= MAX_STEPS) {
          latest = cron.previousRuns(1, new Date(now + 1))[0]?.getTime() ?? latest;
          break;
        }
      }
      return { latest, count, next: cron.nextRun(new Date(now))?.getTime() ?? null };
    }
    case 'at':
      return { latest: due, count: 1, next: null };
  }
}
