import type { Config } from '../core/config.js';
import { createLogger } from '../core/log.js';
import { startGated } from './app.js';

/** Grace period for running agents on the first signal. */
const GRACE_MS = 10_000;

/**
 * `gated run`: the daemon. The first SIGINT/SIGTERM stops polling and lets runs finish within the grace
 * period, then stops them (their unanswered messages go back to ready: nothing is lost) and exits 0. A
 * second signal exits at once; the next start recovers whatever was in flight.
 */
export async function runDaemon(config: Config): Promise<number> {
  const log = createLogger(config.logLevel);
  let gated: Awaited<ReturnType<typeof startGated>>;
  try {
    gated = await startGated({ config, log, demo: true });
  } catch (err) {
    // One line and a non-zero exit: a daemon that cannot serve (port taken, corrupt database) must not
    // run on half-alive, holding the database and running agents nobody can reach.
    process.stderr.write(`gated: cannot start: ${(err as Error).message.split('\n')[0]}\n`);
    process.exit(1);
  }
  const where = gated.url ? ` — web chat at ${gated.url}` : '';
  log.info({ db: config.db, runtime: config.runtime }, `gated is running${where}`);
  if (gated.url && !process.stdout.isTTY) process.stderr.write(`gated: web chat at ${gated.url}\n`);

  return new Promise<number>((resolve) => {
    let signals = 0;
    const onSignal = (sig: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) {
        log.warn({ signal: sig }, 'second signal: exiting now');
        process.exit(130);
      }
      log.info({ signal: sig, graceMs: GRACE_MS }, 'stopping: no new work, letting runs finish');
      void gated.close(GRACE_MS).then(() => {
        log.info('stopped');
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        resolve(0);
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
