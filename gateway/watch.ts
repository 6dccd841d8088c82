import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from '../core/log.js';
import type { Signals } from '../core/signals.js';
import type { Db } from '../store/db.js';

/** The signals another process's commit fires: it may have written any of their work. */
export type CommitSignals = Pick<
  Signals,
  'inbound' | 'outbound' | 'decided' | 'tasks' | 'files' | 'workflows'
>;

/** Another process committed: every stage whose rows it may have written looks. */
function wakeAll(signals: CommitSignals): void {
  signals.inbound.fire();
  signals.outbound.fire(undefined);
  signals.decided.fire();
  signals.tasks.fire();
  signals.files.fire();
  signals.workflows.fire();
}

/**
 * Wakes the stages when another process commits to the database: in WAL mode every commit writes the
 * `-wal` file, and the kernel says so at once (inotify), so rows from sqlite3, `gated send` or an external
 * adapter are taken within milliseconds instead of up to a poll interval later. Only a hint: the poll
 * timer stays the guarantee (a missed event, a filesystem without notifications, a network mount).
 * Wakes are coalesced to one per `minGapMs`. gated's own commits write the file too: they are told apart
 * by SQLite's `data_version`, which moves only for commits of other connections, so gated does not wake
 * itself for what its own stages already signalled (core/signals.ts).
 */
export function watchCommits(
  db: Db,
  dbPath: string,
  signals: CommitSignals,
  log: Logger,
  minGapMs = 2,
): { close(): void } {
  const wal = `${basename(dbPath)}-wal`;
  const dataVersion = db.prepare('PRAGMA data_version').pluck();
  let seen = dataVersion.get() as number;
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  const look = () => {
    timer = undefined;
    if (!db.open) return;
    const now = dataVersion.get() as number;
    if (now === seen) return;
    seen = now;
    wakeAll(signals);
  };
  try {
    watcher = watch(dirname(dbPath), { persistent: false }, (_event, file) => {
      if (file !== wal || timer) return;
      timer = setTimeout(look, minGapMs);
    });
    watcher.on('error', (err) => {
      log.warn({ err: err.message }, 'database watch failed; polling only');
      watcher?.close();
    });
  } catch (err) {
    log.info({ err: (err as Error).message }, 'database watch unavailable; polling only');
  }
  return {
    close() {
      clearTimeout(timer);
      watcher?.close();
    },
  };
}
