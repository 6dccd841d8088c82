import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { WorktreeStore } from '../../store/worktrees.js';
import { removeWorktree } from '../../worktrees/remove.js';
import { bindRepository, ensureWorktree, reposDirOf } from '../../worktrees/worktrees.js';
import { spawnGatedCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';
import { getJson, startWebServer } from '../http/harness.js';
import { makeRepo, plainGit } from './helpers.js';

describe('removing a worktree never loses work', { timeout: 60_000 }, () => {
  it('a clean worktree goes with its branch; a dirty one has its work committed and its branch kept', async () => {
    const root = tempDir();
    const repo = makeRepo(join(root, 'project'));
    const reposDir = reposDirOf(join(root, 'groups'));
    const place = await bindRepository(reposDir, 'code', repo);
    const clean = await ensureWorktree(reposDir, place, 'code', 'clean');
    const dirty = await ensureWorktree(reposDir, place, 'code', 'dirty');
    writeFileSync(join(dirty.path, 'shared.txt'), 'half done\n');
    mkdirSync(join(dirty.path, 'notes'));
    writeFileSync(join(dirty.path, 'notes', 'todo.md'), 'finish it\n');

    expect(await removeWorktree(place, clean.path, clean.branch, 'clean')).toEqual({
      branch: 'topic-clean',
      saved: false,
      unpushed: 0,
      kept: false,
    });
    expect(existsSync(clean.path)).toBe(false);
    expect(plainGit(repo, 'branch', '--list', 'topic-clean')).toBe('');

    expect(await removeWorktree(place, dirty.path, dirty.branch, 'dirty')).toEqual({
      branch: 'topic-dirty',
      saved: true,
      unpushed: 1,
      kept: true,
    });
    expect(existsSync(dirty.path)).toBe(false);
    expect(plainGit(repo, 'show', 'topic-dirty:shared.txt')).toBe('half done');
    expect(plainGit(repo, 'show', 'topic-dirty:notes/todo.md')).toBe('finish it');
    expect(plainGit(repo, 'log', '-1', '--format=%an %s', 'topic-dirty')).toBe(
      'gated gated: the uncommitted work of #dirty when its worktree was removed',
    );
    // The branch is judged pushed once a remote has it: then it goes with its worktree.
    const again = await ensureWorktree(reposDir, place, 'code', 'dirty');
    expect(again).toMatchObject({ created: true, branch: 'topic-dirty' });
    plainGit(repo, 'update-ref', 'refs/remotes/origin/topic-dirty', 'topic-dirty');
    expect(await removeWorktree(place, again.path, again.branch, 'dirty')).toMatchObject({ kept: false });
  });

  it('gated worktrees list shows ahead and behind; rm and prune remove and tell the chat', async () => {
    const dir = tempDir();
    const dbPath = join(dir, 'gated.db');
    const repo = makeRepo(join(dir, 'project'));
    expect(spawnGatedCli(dbPath, {}, 'groups', 'add', 'code')).toMatchObject({ code: 0 });
    expect(spawnGatedCli(dbPath, {}, 'groups', 'repo', 'code', repo)).toMatchObject({ code: 0 });
    const db = openDatabase(dbPath);
    const reposDir = reposDirOf(join(dir, 'groups'));
    const store = new WorktreeStore(db);
    const place = { gitDir: store.repo('code')!.git_dir, branch: 'main', cloned: false };
    const a = await ensureWorktree(reposDir, place, 'code', 'a');
    const b = await ensureWorktree(reposDir, place, 'code', 'b');
    store.ran('code', 'a', a.path, a.branch, new Date().toISOString());
    store.ran('code', 'b', b.path, b.branch, '2026-01-01T00:00:00.000Z');
    db.prepare(
      `INSERT INTO session_log (group_folder, topic, chat_jid, ended_at) VALUES ('code', 'a', 'web:room', 'x')`,
    ).run();
    db.close();
    plainGit(a.path, 'commit', '-q', '--allow-empty', '-m', 'work of a');
    plainGit(repo, 'commit', '-q', '--allow-empty', '-m', 'main moved');

    const list = spawnGatedCli(dbPath, {}, 'worktrees', 'list');
    expect(list.out).toMatch(/^group\ttopic\tbranch\tlast_run\tahead\tbehind\tpath\tremoval$/m);
    expect(list.out).toMatch(/^code\t#a\ttopic-a\t\S+\t1\t1\t\S+\/topic-a\t$/m);
    expect(list.out).toMatch(/^code\t#b\ttopic-b\t2026-01-01T00:00:00.000Z\t0\t1\t/m);

    const rm = spawnGatedCli(dbPath, {}, 'worktrees', 'rm', 'code', '#a');
    expect(rm.out).toMatch(
      /code#a: The worktree of #a was removed \(removed by the operator\)\. Its branch topic-a is kept with 1 commit/,
    );
    expect(spawnGatedCli(dbPath, {}, 'worktrees', 'rm', 'code', '#a')).toMatchObject({ code: 2 });
    const prune = spawnGatedCli(dbPath, {}, 'worktrees', 'prune', '--idle', '7d');
    expect(prune.out).toMatch(/branch topic-b held nothing that is not on the base branch, and is gone/);
    expect(prune.out).toMatch(/1 worktree\(s\) pruned/);
    expect(existsSync(a.path) || existsSync(b.path)).toBe(false);

    const check = new Database(dbPath, { readonly: true });
    try {
      expect(check.prepare('SELECT count(*) FROM worktrees').pluck().get()).toBe(0);
      // Only topic a had a chat; its note waits in the outbox.
      expect(
        check.prepare(`SELECT chat_jid, kind, topic, content FROM messages WHERE is_from_me = 1`).all(),
      ).toEqual([
        {
          chat_jid: 'web:room',
          kind: 'status',
          topic: 'a',
          content:
            'The worktree of #a was removed (removed by the operator). Its branch topic-a is kept with 1 commit not pushed anywhere.',
        },
      ]);
    } finally {
      check.close();
    }
  });
});

describe('the dashboard lists the worktrees', { timeout: 60_000 }, () => {
  it('with branch, last run and ahead/behind', async () => {
    const s = await startWebServer({ groups: ['code'] });
    const root = tempDir();
    const repo = makeRepo(join(root, 'project'));
    const reposDir = reposDirOf(join(root, 'groups'));
    const place = await bindRepository(reposDir, 'code', repo);
    const store = new WorktreeStore(s.db);
    expect((await getJson(`${s.url}/api/dashboard/worktrees`)).body).toEqual({ repos: [], worktrees: [] });
    store.bind({ group_folder: 'code', source: repo, git_dir: place.gitDir, branch: 'main', cloned: 0 });
    const t = await ensureWorktree(reposDir, place, 'code', 'fix');
    store.ran('code', 'fix', t.path, t.branch, '2026-12-02T10:00:00.000Z');
    plainGit(t.path, 'commit', '-q', '--allow-empty', '-m', 'one');
    plainGit(t.path, 'commit', '-q', '--allow-empty', '-m', 'two');
    const body = (await getJson(`${s.url}/api/dashboard/worktrees`)).body as {
      worktrees: Record<string, unknown>[];
    };
    expect(body.worktrees).toEqual([
      expect.objectContaining({
        group_folder: 'code',
        topic: 'fix',
        branch: 'topic-fix',
        last_run_at: '2026-12-02T10:00:00.000Z',
        base: 'main',
        ahead: 2,
        behind: 0,
        remove_reason: null,
      }),
    ]);
  });
});
