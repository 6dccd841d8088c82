import { execFileSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { spawnGatedCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';

/** Runs the real `gated` CLI in a child process against `db`. */
function gated(db: string, ...args: string[]) {
  return spawnGatedCli(db, {}, ...args);
}

/** Runs sqlite3 (the operator's tool) on `db` with `sql` on stdin. */
function sqlite(db: string, sql: string) {
  return execFileSync('sqlite3', [db], { input: sql, encoding: 'utf8' });
}

// Each case runs the CLI several times; on a busy two-core machine one start can take seconds.
describe('gated CLI', { timeout: 120_000 }, () => {
  it('init + routes.example.sql + routes check (0), then bad rows (1) listed by id with reasons', () => {
    const db = join(tempDir(), 'gated.db');
    expect(gated(db, 'init')).toMatchObject({ code: 0 });
    sqlite(db, readFileSync(packageFile('routes.example.sql'), 'utf8'));
    const ok = gated(db, 'routes', 'check');
    expect(ok.code).toBe(0);
    // The example's groups are not registered: valid rows that point nowhere, said as warnings.
    expect(ok.err).toContain("warning: route 5: group 'default/firehose' is not registered");
    sqlite(
      db,
      `INSERT INTO routes (seq, match, target) VALUES (40, 'telegram', 'a/b');
       INSERT INTO routes (seq, match, target) VALUES (41, 'room=[abc', 'a/b');
       INSERT INTO routes (seq, match, target) VALUES (42, 'colour=red', 'a/b');
       INSERT INTO routes (seq, match, target) VALUES (43, 'platform=telegram', '../etc');`,
    );
    const bad = gated(db, 'routes', 'check');
    expect(bad.code).toBe(1);
    const lines = bad.out.trim().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^6\s+token 'telegram' has no '='/);
    expect(lines[1]).toMatch(/^7\s+malformed glob '\[abc' for room/);
    expect(lines[2]).toMatch(/^8\s+unknown key 'colour'/);
    expect(lines[3]).toMatch(/^9\s+bad group folder '\.\.\/etc'/);
    // None of them ever matches: a telegram message still falls to the catch-all at seq 99.
    const ex = gated(db, 'routes', 'explain', 'platform=telegram', 'room=abc', 'verb=message');
    expect(ex.out.trim().split('\n').at(-1)).toBe('target: default/firehose');
    expect(ex.out).toMatch(/#6 .*invalid \(never matches\): token 'telegram'/);
  });

  it('routes explain names the first match and the verdict of every row', () => {
    const db = join(tempDir(), 'gated.db');
    gated(db, 'init');
    sqlite(db, readFileSync(packageFile('routes.example.sql'), 'utf8'));
    const r = gated(db, 'routes', 'explain', 'platform=telegram', 'room=-5075870332', 'verb=mention');
    expect(r.code).toBe(0);
    const lines = r.out.trim().split('\n');
    expect(lines).toHaveLength(6);
    expect(lines[0]).toMatch(/^#1 seq=0 .*krons\/content: MATCH$/);
    expect(lines[1]).toMatch(/^#2 .*would match, but an earlier row already did/);
    expect(lines[2]).toMatch(/^#3 .*no: verb='mention' does not match 'follow'/);
    expect(lines[3]).toMatch(/^#4 .*no: platform='telegram' does not match 'bluesky'/);
    expect(lines[5]).toBe('target: krons/content');
    const none = gated(db, 'routes', 'explain', 'platform=x');
    expect(none.code).toBe(0);
    sqlite(db, 'DELETE FROM routes WHERE seq = 99;');
    expect(gated(db, 'routes', 'explain', 'platform=x').out.trim().split('\n').at(-1)).toBe('target: none');
  });

  it('routes add refuses an invalid row with exit 2 and a one-line reason; list and rm work', () => {
    const db = join(tempDir(), 'gated.db');
    const bad = gated(db, 'routes', 'add', '--seq', '5', '--match', 'room=[abc', 'a/b');
    expect(bad.code).toBe(2);
    expect(bad.err.trim().split('\n')).toHaveLength(1);
    expect(bad.err).toMatch(/route refused: malformed glob/);
    expect(gated(db, 'routes', 'add', '--match', 'platform=x', '../etc')).toMatchObject({ code: 2 });
    expect(gated(db, 'routes', 'add', '--seq', 'ten', 'a/b')).toMatchObject({ code: 2 });
    const add = gated(
      db,
      'routes',
      'add',
      '--seq',
      '5',
      '--match',
      'platform=discord verb=mention',
      'folder:a/b',
    );
    expect(add.code).toBe(0);
    const id = add.out.trim();
    expect(gated(db, 'routes', 'list').out).toMatch(
      new RegExp(`^${id}\\t5\\t0\\tplatform=discord verb=mention\\tfolder:a/b`, 'm'),
    );
    expect(gated(db, 'routes', 'rm', id)).toMatchObject({ code: 0 });
    expect(gated(db, 'routes', 'rm', id)).toMatchObject({ code: 2 });
    expect(gated(db, 'routes', 'explain', 'colour=red')).toMatchObject({ code: 2 });
  });

  it('groups add validates folder names and creates the folder; send inserts an inbound row', () => {
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    for (const bad of ['../x', '/abs', 'Krons', 'a//b', 'a/../b']) {
      const r = gated(db, 'groups', 'add', bad);
      expect(r.code, bad).toBe(2);
      expect(r.err).toMatch(/bad group folder/);
    }
    expect(gated(db, 'groups', 'add', 'krons/content', '--name', 'Content')).toMatchObject({ code: 0 });
    expect(existsSync(join(dir, 'groups', 'krons+content'))).toBe(true);
    expect(existsSync(join(dir, 'groups', 'krons'))).toBe(false);
    expect(gated(db, 'groups', 'list').out).toMatch(/^krons\/content\tContent/m);
    expect(gated(db, 'groups', 'rm', 'nope')).toMatchObject({ code: 2 });
    // What a platform thread is to the group: topics by default, replies when set.
    const threadsOf = () => sqlite(db, `SELECT threads FROM registered_groups;`).trim();
    expect(threadsOf()).toBe('topics');
    expect(gated(db, 'groups', 'threads', 'krons/content', 'replies').out).toMatch(/threads as replies/);
    expect(threadsOf()).toBe('replies');
    expect(gated(db, 'groups', 'threads', 'krons/content', 'sometimes')).toMatchObject({ code: 2 });
    expect(gated(db, 'groups', 'threads', 'nope', 'topics')).toMatchObject({ code: 2 });
    expect(threadsOf()).toBe('replies');
    // The docker network its containers join: none by default, a name when set, shown by `groups list`.
    expect(gated(db, 'groups', 'list').out).toMatch(/^krons\/content\tContent\t\tnone\t/m);
    expect(gated(db, 'groups', 'network', 'krons/content', 'agents-net').out).toMatch(/network agents-net/);
    expect(gated(db, 'groups', 'list').out).toMatch(/^krons\/content\tContent\t\tagents-net\t/m);
    const bad = gated(db, 'groups', 'network', 'krons/content', 'container:abc');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/bad network name 'container:abc'/);
    expect(gated(db, 'groups', 'network', 'nope', 'bridge')).toMatchObject({ code: 2 });
    expect(gated(db, 'groups', 'network', 'krons/content', 'none').out).toMatch(/network none/);
    expect(sqlite(db, `SELECT coalesce(network, 'NULL') FROM registered_groups;`).trim()).toBe('NULL');
    // What a message does while the agent works on a turn: queue by default, set per group, audited.
    expect(sqlite(db, `SELECT busy FROM registered_groups;`).trim()).toBe('queue');
    expect(gated(db, 'groups', 'busy', 'krons/content', 'steer').out).toMatch(/krons\/content: busy steer/);
    expect(sqlite(db, `SELECT busy FROM registered_groups;`).trim()).toBe('steer');
    const badBusy = gated(db, 'groups', 'busy', 'krons/content', 'sometimes');
    expect(badBusy).toMatchObject({ code: 2 });
    expect(badBusy.err).toMatch(/bad busy mode 'sometimes': 'queue', 'steer' or 'interrupt'/);
    expect(gated(db, 'groups', 'busy', 'nope', 'queue')).toMatchObject({ code: 2 });
    expect(sqlite(db, `SELECT busy FROM registered_groups;`).trim()).toBe('steer');
    expect(gated(db, 'audit').out).toMatch(
      /\tcli:\S+\tregistered_groups\.update\tkrons\/content\t.*"busy":"queue".*"busy":"steer"/,
    );
    const s = gated(db, 'send', 'telegram:-5075870332', 'hello there', '--sender', '42', '--verb', 'mention');
    expect(s.code).toBe(0);
    const row = sqlite(
      db,
      `SELECT chat_jid, sender, content, verb, is_from_me FROM messages WHERE id = ${s.out.trim()};`,
    );
    expect(row.trim()).toBe('telegram:-5075870332|42|hello there|mention|0');
    expect(gated(db, 'send', 'nocolon', 'x')).toMatchObject({ code: 2 });
    expect(gated(db, 'status').out).toMatch(/groups \(1\): krons\/content/);
  });

  it('unknown options and commands exit 2, and an unknown command is named as one', () => {
    const db = join(tempDir(), 'gated.db');
    gated(db, 'init');
    expect(gated(db, 'routes', 'list', '--bogus').code).toBe(2);
    const typo = gated(db, 'stauts');
    expect(typo.code).toBe(2);
    expect(typo.err).toMatch(/^gated: unknown command 'stauts' \(commands: run, chat, init/);
    expect(typo.err).not.toMatch(/too many arguments/);
    expect(gated(db, '--help').code).toBe(0);
  });

  it('a mistyped --db is refused by commands that read, and never created', () => {
    const dir = tempDir();
    const missing = join(dir, 'typo', 'gated.db');
    for (const args of [['status'], ['routes', 'list'], ['groups', 'list'], ['audit'], ['tasks', 'list']]) {
      const r = gated(missing, ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toBe(
        `gated: no database at ${missing}: start gated or run 'gated init' to create it, or pass --db PATH\n`,
      );
    }
    expect(existsSync(join(dir, 'typo'))).toBe(false);
  });

  it('routes add needs --seq and --match: a bare target never becomes a catch-all in first place', () => {
    const db = join(tempDir(), 'gated.db');
    gated(db, 'init');
    expect(gated(db, 'routes', 'add', 'demo').err).toMatch(/required option '--seq <n>' not specified/);
    expect(gated(db, 'routes', 'add', 'demo', '--seq', '5').err).toMatch(/required option '--match/);
    expect(sqlite(db, 'SELECT count(*) FROM routes;').trim()).toBe('0');
    expect(gated(db, 'routes', 'add', 'demo', '--seq', '5', '--match', '')).toMatchObject({ code: 0 });
    expect(sqlite(db, 'SELECT seq, match, target FROM routes;').trim()).toBe('5||demo');
  });
});
