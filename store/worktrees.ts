import type { Db } from './db.js';

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
}

/** The statements of group_repos and worktrees. */
export class WorktreeStore {
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

  /** Forgets a topic's worktree row. */
  forget(group: string, topic: string): boolean {
    return (
      this.db.prepare('DELETE FROM worktrees WHERE group_folder = ? AND topic = ?').run(group, topic)
        .changes > 0
    );
  }
}
