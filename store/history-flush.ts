import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Db } from './db.js';
import { writeEvery } from './group-commit.js';
import type { History } from './history.js';

/**
 * Writes the per-minute history every `everyMs`; returns the shutdown step (a last flush). A flush that
 * waits for another process's write lock waits off the event loop (it writes the same minutes as the one
 * it would have been followed by); a failed one is logged and the next retries.
 */
export function flushHistoryEvery(
  db: Db,
  history: History | undefined,
  everyMs: number,
  log: Logger,
): () => void {
  const failed = (err: unknown) =>
    log.error({ err: coerceError(err).message }, 'writing the history failed; the next flush retries');
  const timer = history ? writeEvery(db, everyMs, () => history.flush(Date.now()), failed) : undefined;
  return () => {
    clearInterval(timer);
    try {
      history?.flush(Date.now());
    } catch (err) {
      failed(err);
    }
  };
}
