/**
 * The move of nested groups' folders out of their parents' (store/group-layout.ts, docs/OPERATIONS.md): an
 * install of the old layout, with files of every kind in its nested folders, upgraded by a real start of
 * gated; every file is kept with its bytes, mode and owner, a link a parent's agent planted at its child's
 * old place is neither followed nor moved, and the move is done once.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { groupDirOf } from '../../core/group-dir.js';
import { createLogger } from '../../core/log.js';
import type { Db } from '../../store/db.js';
import { FolderMoveError, LAYOUT_KEY, moveNestedFolders } from '../../store/group-layout.js';
import { getState } from '../../store/state.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';

/** Every entry below `dir`: its kind, mode, owner, and its bytes' hash or its link's target. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const r = join(rel, name);
      const st = lstatSync(join(dir, r));
      const what = st.isDirectory()
        ? 'dir'
        : st.isSymbolicLink()
          ? `link:${readlinkSync(join(dir, r))}`
          : createHash('sha256')
              .update(readFileSync(join(dir, r)))
              .digest('hex');
      out[r] = `${what} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
      if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  return out;
}

/** A log that keeps its lines, to read what the move said. */
function keptLog() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { log: createLogger('debug', false, sink), lines };
}

/** Registers groups as an old install has them: rows only, no folder at any new place. */
function register(db: Db, folders: string[]) {
  const add = db.prepare(`INSERT INTO registered_groups (folder) VALUES (?)`);
  for (const f of folders) add.run(f);
}

/** The old layout: `pub/c` and `pub/c/d` inside `pub`, files of each, a mode-600 file, a link, a hidden folder. */
function oldInstall(groups: string) {
  mkdirSync(join(groups, 'pub', 'c', 'd', 'deep'), { recursive: true });
  mkdirSync(join(groups, 'pub', 'c', '.claude-agent'), { recursive: true });
  writeFileSync(join(groups, 'pub', 'notes.md'), "the parent's own file\n");
  writeFileSync(join(groups, 'pub', 'c', 'CLAUDE.md'), "the child's instructions\n");
  writeFileSync(join(groups, 'pub', 'c', '.claude-agent', 'session.jsonl'), '{"a":1}\n');
  writeFileSync(join(groups, 'pub', 'c', 'private.key'), 'mode 600, kept as it is\n');
  chmodSync(join(groups, 'pub', 'c', 'private.key'), 0o600);
  chownSync(join(groups, 'pub', 'c', 'private.key'), 1000, 1000);
  symlinkSync('CLAUDE.md', join(groups, 'pub', 'c', 'alias.md'));
  writeFileSync(join(groups, 'pub', 'c', 'd', 'deep', 'data.bin'), Buffer.alloc(70_000, 7));
  mkdirSync(join(groups, 'solo'));
  writeFileSync(join(groups, 'solo', 'x.txt'), 'a top-level group does not move\n');
}

/** `snap` without the entries at and below `sub`. */
function without(snap: Record<string, string>, sub: string): Record<string, string> {
  return Object.fromEntries(Object.entries(snap).filter(([k]) => k !== sub && !k.startsWith(`${sub}/`)));
}

describe('nested group folders move out of their parents at start', () => {
  test('an old install upgraded by a real start keeps every file, mode and owner, each folder at its new place', async () => {
    let groups = '';
    let before: Record<string, Record<string, string>> = {};
    const g = await startTestGated({
      channels: [],
      seed: (db, config) => {
        groups = config.groupsDir;
        register(db, ['pub', 'pub/c', 'pub/c/d', 'solo']);
        oldInstall(groups);
        before = {
          pub: without(snapshot(join(groups, 'pub')), 'c'),
          'pub/c': without(snapshot(join(groups, 'pub', 'c')), 'd'),
          'pub/c/d': snapshot(join(groups, 'pub', 'c', 'd')),
          solo: snapshot(join(groups, 'solo')),
        };
      },
    });
    expect(readdirSync(groups).sort()).toEqual(['pub', 'pub+c', 'pub+c+d', 'solo']);
    for (const f of ['pub', 'pub/c', 'pub/c/d', 'solo'])
      expect(snapshot(groupDirOf(groups, f))).toEqual(before[f]);
    expect(Object.keys(before['pub/c']!)).toContain('private.key');
    expect(snapshot(groupDirOf(groups, 'pub/c'))['private.key']).toMatch(/ 600 1000:1000$/);
    expect(getState(g.db, LAYOUT_KEY)).toBe('siblings');
  });

  test('a link planted at the old place is neither followed nor moved, and the move is done once', () => {
    const { db } = freshDb();
    const groups = join(tempDir(), 'groups');
    register(db, ['pub', 'pub/c', 'secret', 'other', 'other/x']);
    mkdirSync(join(groups, 'secret'), { recursive: true });
    writeFileSync(join(groups, 'secret', 'members-only.txt'), 'secret\n');
    chmodSync(join(groups, 'secret', 'members-only.txt'), 0o600);
    mkdirSync(join(groups, 'pub'));
    mkdirSync(join(groups, 'other'));
    // The old layout as parents' agents left it: a child's folder a link to another group's, or to the root.
    symlinkSync('../secret', join(groups, 'pub', 'c'));
    symlinkSync('..', join(groups, 'other', 'x'));
    const whole = snapshot(groups);
    const { log, lines } = keptLog();
    moveNestedFolders(db, groups, log);
    expect(snapshot(groups)).toEqual(whole);
    const warned = lines.filter((l) => l.level === 40).map((l) => [l.folder, l.found]);
    expect(warned).toEqual([
      ['other/x', 'a link to ..'],
      ['pub/c', 'a link to ../secret'],
    ]);
    expect(getState(db, LAYOUT_KEY)).toBe('siblings');

    // Once done, a folder an agent makes at an old place later is never moved into its child's place.
    unlinkSync(join(groups, 'pub', 'c'));
    mkdirSync(join(groups, 'pub', 'c'));
    writeFileSync(join(groups, 'pub', 'c', 'CLAUDE.md'), "the parent's agent's words\n");
    const planted = snapshot(groups);
    moveNestedFolders(db, groups, log);
    expect(snapshot(groups)).toEqual(planted);
    expect(existsSync(groupDirOf(groups, 'pub/c'))).toBe(false);
  });

  test('a start cut off between two moves goes on where it stopped', () => {
    const { db } = freshDb();
    const groups = join(tempDir(), 'groups');
    register(db, ['a', 'a/b', 'a/b/c']);
    // The first start moved `a/b/c` out of `a/b` and was killed before it moved `a/b`.
    mkdirSync(join(groups, 'a', 'b'), { recursive: true });
    writeFileSync(join(groups, 'a', 'b', 'g.txt'), 'b\n');
    mkdirSync(join(groups, 'a+b+c'));
    writeFileSync(join(groups, 'a+b+c', 'f.txt'), 'c\n');
    // Files of replies not sent yet, named where they were (a look-alike folder `a/bb` stays as it is).
    const file = db.prepare(
      `INSERT INTO outbound_files (message_id, seq, path, abs_path, name, mime) VALUES (1, ?, 'x', ?, 'x', 'text/plain')`,
    );
    const old = ['a/b/g.txt', 'a/b/c/f.txt', 'a/bb/h.txt', 'a/top.txt'];
    old.forEach((rel, seq) => file.run(seq, join(groups, rel)));
    moveNestedFolders(db, groups, createLogger('silent', false));
    expect(readFileSync(join(groups, 'a+b+c', 'f.txt'), 'utf8')).toBe('c\n');
    expect(readFileSync(join(groups, 'a+b', 'g.txt'), 'utf8')).toBe('b\n');
    expect(readdirSync(join(groups, 'a'))).toEqual([]);
    // Both moved folders' rows follow them (`a/b/c` moved in the cut-off start, before its rows were
    // rewritten); the look-alike and the top-level group's keep theirs.
    expect(db.prepare(`SELECT abs_path FROM outbound_files ORDER BY seq`).pluck().all()).toEqual(
      ['a+b/g.txt', 'a+b+c/f.txt', 'a/bb/h.txt', 'a/top.txt'].map((r) => join(groups, r)),
    );
  });

  test('an old and a new place that both exist are left for the operator; nothing is overwritten', () => {
    const { db } = freshDb();
    const groups = join(tempDir(), 'groups');
    register(db, ['p', 'p/q']);
    mkdirSync(join(groups, 'p', 'q'), { recursive: true });
    writeFileSync(join(groups, 'p', 'q', 'old.txt'), 'old\n');
    mkdirSync(join(groups, 'p+q'));
    writeFileSync(join(groups, 'p+q', 'new.txt'), 'new\n');
    const whole = snapshot(groups);
    const { log, lines } = keptLog();
    moveNestedFolders(db, groups, log);
    expect(snapshot(groups)).toEqual(whole);
    expect(lines.filter((l) => l.level === 40).map((l) => [l.folder, l.msg])).toEqual([
      [
        'p/q',
        'nested group folder: both the old and the new place exist; the old one is left for the operator to merge',
      ],
    ]);
  });

  test('a folder that cannot be moved stops the start, names what to do, and is tried again at the next', async () => {
    const dir = tempDir();
    const groups = join(dir, 'groups');
    const seed = (db: Db) => {
      register(db, ['p', 'p/q']);
      mkdirSync(join(groups, 'p', 'q'), { recursive: true });
    };
    // A mount point cannot be renamed (EBUSY): as a folder on another disk, or one gated may not move.
    let mounted = false;
    try {
      const env = { GATED_GROUPS_DIR: groups, GATED_DB: join(dir, 'gated.db') };
      const first = startTestGated({
        channels: [],
        env,
        seed: (db) => {
          seed(db);
          execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', join(groups, 'p', 'q')]);
          mounted = true;
          writeFileSync(join(groups, 'p', 'q', 'kept.txt'), 'kept\n');
        },
      });
      await expect(first).rejects.toThrow(
        new RegExp(`cannot move the folder of group p/q from ${groups}/p/q to ${groups}/p\\+q \\(EBUSY\\)`),
      );
      await expect(first).rejects.toBeInstanceOf(FolderMoveError);
      expect(readFileSync(join(groups, 'p', 'q', 'kept.txt'), 'utf8')).toBe('kept\n');
      execFileSync('umount', [join(groups, 'p', 'q')]);
      mounted = false;
      // The operator moved nothing: the next start moves the (now plain) folder itself.
      writeFileSync(join(groups, 'p', 'q', 'kept.txt'), 'kept\n');
      const g = await startTestGated({ channels: [], env });
      expect(readFileSync(join(groups, 'p+q', 'kept.txt'), 'utf8')).toBe('kept\n');
      expect(getState(g.db, LAYOUT_KEY)).toBe('siblings');
    } finally {
      if (mounted) execFileSync('umount', [join(groups, 'p', 'q')]);
    }
  });
});
