import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from '../core/log.js';

/**
 * Wakes the poll loop when another process commits to the database: in WAL mode every commit writes the
 * `-wal` file, and the kernel says so at once (inotify), so rows from sqlite3, `gated send` or an external
 * adapter are taken within milliseconds instead of up to a poll interval later. Only a hint: the poll
 * timer stays the guarantee (a missed event, a filesystem without notifications, a network mount).
 * Wakes are coalesced to one per `minGapMs`; a wake that finds nothing new costs one index seek.
 */
export function watchCommits(dbPath: string, wake: () => void, log: Logger, minGapMs = 2): { close(): void } {
  const wal = `${basename(dbPath)}-wal`;
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(dbPath), { persistent: false }, (_event, file) => {
      if (file !== wal || timer) return;
      timer = setTimeout(() => {
        timer = undefined;
        wake();
      }, minGapMs);
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
