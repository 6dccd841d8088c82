import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scheduleOption } from '../../gated/commands/tasks.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { gatedCli, spawnGatedCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';

const gated = spawnGatedCli;

describe('gated tasks', { timeout: 120_000 }, () => {
  it('picks exactly one schedule option', () => {
    expect(scheduleOption({ every: '15m' })).toEqual({ kind: 'every', spec: '15m' });
    expect(scheduleOption({ cron: '0 9 * * *' })).toEqual({ kind: 'cron', spec: '0 9 * * *' });
    expect(() => scheduleOption({})).toThrow('say when: one of --cron, --every or --at');
    expect(() => scheduleOption({ every: '1h', at: '2030-01-01T00:00Z' })).toThrow(
      'give one schedule, not --every and --at',
    );
  });

  it('add, list, pause, resume, rm; bad input is one line and exit 2', async () => {
    const db = join(tempDir(), 'gated.db');
    const seed = openDatabase(db);
    addGroup(seed, join(db, '..', 'groups'), 'ops');
    seed.close();
    const tz = { GATED_TZ: 'Europe/Berlin' };

    const add = gated(
      db,
      tz,
      'tasks',
      'add',
      '--group',
      'ops',
      '--topic',
      '#daily',
      '--chat',
      'telegram:-100',
      '--cron',
      '0 9 * * 1-5',
      'morning',
      'report',
    );
    expect(add).toMatchObject({ code: 0 });
    expect(add.out).toMatch(/^task 1 added, next run \d{4}-\d\d-\d\dT0[78]:00:00\.000Z\n$/);
    const every = await gatedCli(
      db,
      'tasks',
      'add',
      '--group',
      'ops',
      '--chat',
      'web:ops',
      '--every',
      '90m',
      'stretch',
    );
    expect(every).toMatchObject({ code: 0, out: /^task 2 added/ });

    const list = gated(db, tz, 'tasks', 'list').out.trim().split('\n');
    expect(list[0]).toBe(
      'id\tstatus\tgroup\ttopic\tchat\tkind\tspec\tnext_run_at\tlast_run_at\tfailures\ttext',
    );
    expect(list[1]).toMatch(
      /^1\tactive\tops\tdaily\ttelegram:-100\tcron\t0 9 \* \* 1-5\t\S+\t\t0\tmorning report$/,
    );
    expect(list[2]).toMatch(/^2\tactive\tops\t\tweb:ops\tevery\t1h30m\t/);

    expect(await gatedCli(db, 'tasks', 'pause', '1')).toMatchObject({ code: 0, out: 'task 1 paused\n' });
    expect(await gatedCli(db, 'tasks', 'pause', '1')).toMatchObject({
      code: 2,
      err: 'gated: task 1 is not active\n',
    });
    expect((await gatedCli(db, 'tasks', 'resume', '1')).out).toMatch(/^task 1 resumed, next run \S+Z\n$/);
    expect(await gatedCli(db, 'tasks', 'rm', '2')).toMatchObject({ code: 0, out: 'task 2 removed\n' });
    expect((await gatedCli(db, 'tasks', 'list')).out.trim().split('\n')).toHaveLength(2);

    const bad: Array<[string[], RegExp]> = [
      [['add', '--group', 'nope', '--chat', 'web:x', '--every', '1h', 't'], /^gated: no group 'nope'\n$/],
      [['add', '--group', 'ops', '--chat', 'web:x', '--every', '1x', 't'], /^gated: bad duration '1x'/],
      [
        ['add', '--group', 'ops', '--chat', 'web:x', '--cron', '* * *', 't'],
        /^gated: bad cron pattern '\* \* \*'/,
      ],
      [['add', '--group', 'ops', '--chat', 'web:x', '--at', '2001-01-01T00:00Z', 't'], /not in the future/],
      [['add', '--group', 'ops', '--chat', 'web:x', 't'], /^gated: say when/],
      [['add', '--group', 'ops', '--chat', 'x', '--every', '1h', 't'], /^gated: bad chat 'x'/],
      [['rm', '99'], /^gated: no task with id 99\n$/],
      [['resume', 'abc'], /^gated: id must be an integer, got 'abc'\n$/],
    ];
    for (const [args, err] of bad) {
      const r = await gatedCli(db, 'tasks', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err, args.join(' ')).toMatch(err);
      expect(r.err.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
    expect(gated(db, { GATED_TZ: 'Mars/Base' }, 'tasks', 'list')).toMatchObject({
      code: 2,
      err: /unknown time zone 'Mars\/Base'/,
    });
  }, 60_000);
});
