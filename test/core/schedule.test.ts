import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../core/duration.js';
import { UsageError } from '../../core/errors.js';
import {
  checkTimeZone,
  dueRange,
  nextDue,
  planSchedule,
  wallTime,
  type Schedule,
} from '../../core/schedule.js';

const T = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe('durations', () => {
  it('reads <n>(ms|s|m|h|d) pieces, concatenated', () => {
    expect(parseDuration('15m')).toBe(15 * 60_000);
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('1d12h')).toBe(36 * 3_600_000);
    expect(parseDuration('1500ms')).toBe(1500);
    expect(parseDuration('1m500ms')).toBe(60_500);
    expect(parseDuration('1s')).toBe(1000);
  });

  it('refuses anything else with a named error', () => {
    for (const bad of ['', '15', 'm', '1.5h', '-1h', '1h 30m', '1w', '1hh', '0s', 'PT1H', '99999d']) {
      expect(() => parseDuration(bad), bad).toThrow(UsageError);
    }
    expect(() => parseDuration('1w')).toThrow(/bad duration '1w'/);
  });

  it('formats what it reads, largest units first', () => {
    expect(formatDuration(5_400_000)).toBe('1h30m');
    expect(formatDuration(60_500)).toBe('1m500ms');
    for (const d of ['1d', '2h15m', '45s', '1d1h1m1s1ms']) expect(formatDuration(parseDuration(d))).toBe(d);
  });
});

describe('schedules', () => {
  const now = T('2026-11-23T10:00:00.000Z');

  it('every: first due one interval after the add time, then on that grid', () => {
    const p = planSchedule('every', '90m', now, 'UTC');
    expect(p).toEqual({ spec: '1h30m', anchorMs: now, first: now + 5_400_000 });
    const s: Schedule = { kind: 'every', spec: p.spec, anchorMs: p.anchorMs };
    expect(iso(nextDue(s, now + 5_400_000, 'UTC'))).toBe('2026-11-23T13:00:00.000Z');
    // Down from 11:29 to 15:10: the due times 11:30, 13:00 and 14:30 fire once, as 14:30.
    const r = dueRange(s, T('2026-11-23T11:30:00Z'), T('2026-11-23T15:10:00Z'), 'UTC');
    expect({ latest: iso(r.latest), count: r.count, next: iso(r.next) }).toEqual({
      latest: '2026-11-23T14:30:00.000Z',
      count: 3,
      next: '2026-11-23T16:00:00.000Z',
    });
  });

  it('at: once, an ISO time; without an offset it is read in the zone; the past is refused', () => {
    expect(planSchedule('at', '2026-12-24T17:00Z', now, 'UTC').spec).toBe('2026-12-24T17:00:00.000Z');
    expect(planSchedule('at', '2026-12-24T18:00', now, 'Europe/Berlin').spec).toBe(
      '2026-12-24T17:00:00.000Z',
    );
    expect(planSchedule('at', '2026-07-01T18:00', now - 200 * 86_400_000, 'Europe/Berlin').spec).toBe(
      '2026-07-01T16:00:00.000Z',
    );
    expect(() => planSchedule('at', '2026-11-23T09:00Z', now, 'UTC')).toThrow(/not in the future/);
    expect(() => planSchedule('at', 'tomorrow', now, 'UTC')).toThrow(/bad time 'tomorrow'/);
    const s: Schedule = { kind: 'at', spec: '2026-12-24T17:00:00.000Z', anchorMs: now };
    expect(dueRange(s, T(s.spec), T(s.spec) + 5, 'UTC')).toMatchObject({ count: 1, next: null });
  });

  it('cron: exactly 5 fields; bad patterns and zones are named', () => {
    expect(planSchedule('cron', '0 9 * * 1-5', now, 'UTC').first).toBe(T('2026-11-24T09:00:00Z'));
    expect(() => planSchedule('cron', '* * * * * *', now, 'UTC')).toThrow(
      /bad cron pattern '\* \* \* \* \* \*'/,
    );
    expect(() => planSchedule('cron', '61 * * * *', now, 'UTC')).toThrow(UsageError);
    expect(() => planSchedule('cron', 'every day', now, 'UTC')).toThrow(UsageError);
    expect(() => checkTimeZone('Mars/Olympus')).toThrow(/unknown time zone 'Mars\/Olympus'/);
    expect(checkTimeZone('Europe/Berlin')).toBe('Europe/Berlin');
  });

  it('cron in Europe/Berlin follows the clock across both daylight-saving changes', () => {
    const tz = 'Europe/Berlin';
    const nine: Schedule = { kind: 'cron', spec: '0 9 * * *', anchorMs: 0 };
    const walk = (s: Schedule, from: string, n: number) => {
      const out: string[] = [];
      let t = T(from);
      for (let i = 0; i < n; i++) out.push(iso((t = nextDue(s, t, tz)!))!);
      return out;
    };
    // 09:00 local is 08:00Z in winter and 07:00Z in summer (CET → CEST on 2026-03-29).
    expect(walk(nine, '2026-03-27T12:00:00Z', 3)).toEqual([
      '2026-03-28T08:00:00.000Z',
      '2026-03-29T07:00:00.000Z',
      '2026-03-30T07:00:00.000Z',
    ]);
    // Back to CET on 2026-10-25.
    expect(walk(nine, '2026-10-23T12:00:00Z', 3)).toEqual([
      '2026-10-24T07:00:00.000Z',
      '2026-10-25T08:00:00.000Z',
      '2026-10-26T08:00:00.000Z',
    ]);
    // 02:30 does not exist on 2026-03-29: it fires at the first valid time after the gap, once; on
    // 2026-10-25 02:30 happens twice and fires once.
    const half: Schedule = { kind: 'cron', spec: '30 2 * * *', anchorMs: 0 };
    expect(walk(half, '2026-03-28T12:00:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(walk(half, '2026-10-24T12:00:00Z', 2)).toEqual([
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
  });

  it('cron: a long outage fires once and is counted', () => {
    const s: Schedule = { kind: 'cron', spec: '*/15 * * * *', anchorMs: 0 };
    const r = dueRange(s, T('2026-11-23T10:15:00Z'), T('2026-11-23T12:07:00Z'), 'UTC');
    expect({ latest: iso(r.latest), count: r.count, next: iso(r.next) }).toEqual({
      latest: '2026-11-23T12:00:00.000Z',
      count: 8,
      next: '2026-11-23T12:15:00.000Z',
    });
  });
});

describe('wall times in notices', () => {
  it('gives minutes in the zone, named, across a date line and a DST change', () => {
    expect(wallTime(Date.UTC(2026, 11, 2, 23, 30), 'UTC')).toBe('2026-12-02 23:30 UTC');
    expect(wallTime(Date.UTC(2026, 11, 2, 23, 30), 'Europe/Berlin')).toBe('2026-12-03 00:30 Europe/Berlin');
    expect(wallTime(Date.UTC(2026, 6, 2, 23, 30), 'Europe/Berlin')).toBe('2026-07-03 01:30 Europe/Berlin');
  });
});
