import type { Statement } from 'better-sqlite3';
import type { Platform, RoomRepository } from '../core/platforms.js';
import type { Db } from './db.js';
import { getState, setState } from './state.js';

/** A group's repository binding (table group_repos, docs/WORKTREES.md). */
export interface RepoRow {
  group_folder: string;
  /** What the operator gave: the URL cloned or the local repository adopted. */
  source: string;
  /** The repository's common git folder on disk. */
  git_dir: string;
  /** The base branch new topic branches start from. */
  branch: string;
  /** 1: gated's own bare clone; 0: an operator's repository adopted where it lies. */
  cloned: number;
  added_at: string;
}

/** One topic's worktree (table worktrees). */
export interface WorktreeRow {
  group_folder: string;
  topic: string;
  path: string;
  branch: string;
  created_at: string;
  last_run_at: string | null;
  /** Why the worktree is to be removed (NULL: it stays). */
  remove_reason: string | null;
  /** The chat told what became of its branch. */
  remove_chat: string | null;
}

/** The statements of group_repos and worktrees. */
export class WorktreeStore {
  /** Prepared at the first call: the worktree sweep asks after every run's end (queue/worktree.ts). */
  private removalsStmt: Statement | undefined;

  constructor(private readonly db: Db) {}

  /** Binds (or binds again) a group to a repository. */
  bind(r: Omit<RepoRow, 'added_at'>): void {
    this.db
      .prepare(
        `INSERT INTO group_repos (group_folder, source, git_dir, branch, cloned)
         VALUES (@group_folder, @source, @git_dir, @branch, @cloned)
         ON CONFLICT (group_folder) DO UPDATE SET
           source = excluded.source, git_dir = excluded.git_dir, branch = excluded.branch,
           cloned = excluded.cloned`,
      )
      .run(r);
  }

  /** The group's repository, or undefined when it has none. */
  repo(group: string): RepoRow | undefined {
    return this.db.prepare('SELECT * FROM group_repos WHERE group_folder = ?').get(group) as
      RepoRow | undefined;
  }

  /** Every binding by group. */
  repos(): RepoRow[] {
    return this.db.prepare('SELECT * FROM group_repos ORDER BY group_folder').all() as RepoRow[];
  }

  /** The topic's worktree row, or undefined. */
  worktree(group: string, topic: string): WorktreeRow | undefined {
    return this.db
      .prepare('SELECT * FROM worktrees WHERE group_folder = ? AND topic = ?')
      .get(group, topic) as WorktreeRow | undefined;
  }

  /** Every worktree, of one group or of all, by group and topic. */
  worktrees(group?: string): WorktreeRow[] {
    return (
      group === undefined
        ? this.db.prepare('SELECT * FROM worktrees ORDER BY group_folder, topic').all()
        : this.db.prepare('SELECT * FROM worktrees WHERE group_folder = ? ORDER BY topic').all(group)
    ) as WorktreeRow[];
  }

  /** Records a topic's worktree (made or found) and that a run starts in it now. */
  ran(group: string, topic: string, path: string, branch: string, at: string): void {
    this.db
      .prepare(
        `INSERT INTO worktrees (group_folder, topic, path, branch, last_run_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (group_folder, topic) DO UPDATE SET
           path = excluded.path, branch = excluded.branch, last_run_at = excluded.last_run_at`,
      )
      .run(group, topic, path, branch, at);
  }

  /**
   * Asks for a topic's worktree to be removed once no run uses it; `chat` is told what became of its
   * branch. False when the topic has no worktree.
   */
  requestRemoval(group: string, topic: string, reason: string, chat: string | null): boolean {
    return (
      this.db
        .prepare(
          `UPDATE worktrees SET remove_reason = ?, remove_chat = coalesce(?, remove_chat)
           WHERE group_folder = ? AND topic = ?`,
        )
        .run(reason, chat, group, topic).changes > 0
    );
  }

  /** The worktrees asked to go. */
  removals(): WorktreeRow[] {
    this.removalsStmt ??= this.db.prepare(
      'SELECT * FROM worktrees WHERE remove_reason IS NOT NULL ORDER BY group_folder, topic',
    );
    return this.removalsStmt.all() as WorktreeRow[];
  }

  /** The chat of the topic's latest run: where news of its worktree goes when no chat asked. */
  lastChat(group: string, topic: string): string | null {
    return (
      (this.db
        .prepare(
          `SELECT chat_jid FROM session_log WHERE group_folder = ? AND topic = ? AND chat_jid IS NOT NULL
           ORDER BY id DESC LIMIT 1`,
        )
        .pluck()
        .get(group, topic) as string | undefined) ?? null
    );
  }

  /** Forgets a topic's worktree row. */
  forget(group: string, topic: string): boolean {
    return (
      this.db.prepare('DELETE FROM worktrees WHERE group_folder = ? AND topic = ?').run(group, topic)
        .changes > 0
    );
  }
}

/** The router_state key of where a platform's repository (`owner/name`) is cloned from. */
function cloneUrlKey(repo: RoomRepository): string {
  return `${repo.platform}.clone_url:${repo.fullName.toLowerCase()}`;
}

/**
 * Records the clone URL each delivery of `platform` names for its repository (written only when new or
 * changed), so a group serving that repository's chats can be bound to it at its first run
 * (docs/WORKTREES.md).
 */
export function cloneUrlRecorder(db: Db, platform: Platform): (fullName: string, cloneUrl: string) => void {
  const seen = new Map<string, string>();
  return (fullName, cloneUrl) => {
    if (seen.get(fullName) === cloneUrl) return;
    setState(db, cloneUrlKey({ platform, fullName }), cloneUrl);
    seen.set(fullName, cloneUrl);
  };
}

/** Where the repository a room names is cloned from, as its platform's deliveries said; undefined before one. */
export function cloneUrlOf(db: Db, repo: RoomRepository): string | undefined {
  return getState(db, cloneUrlKey(repo));
}
