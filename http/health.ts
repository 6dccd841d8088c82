import { Hono } from 'hono';
import { coerceError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { Queries } from './queries.js';

const PING_TIMEOUT_MS = 3000;

/** Rejects after `ms` unless `p` settles first. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/healthz`: 200 `{status:"ok"}` when the database answers a query, the runtime answers its ping and
 * every check of `more` says ok (gated adds the poll loop's last tick and the queue's running rows);
 * otherwise 503 with `reason` naming the part that failed. Never includes configuration or secrets.
 */
export function healthApi(
  q: Queries,
  pingRuntime: (() => Promise<void>) | undefined,
  more?: () => Record<string, string>,
): Hono {
  const app = new Hono();
  app.get('/', async (c) => {
    const checks: Record<string, string> = {};
    try {
      q.ping();
      checks.db = 'ok';
    } catch (err) {
      checks.db = coerceError(err).message;
    }
    try {
      if (pingRuntime) await within(pingRuntime(), PING_TIMEOUT_MS, 'runtime');
      checks.runtime = 'ok';
    } catch (err) {
      checks.runtime = coerceError(err).message;
    }
    if (more) {
      try {
        Object.assign(checks, more());
      } catch (err) {
        checks.gateway = coerceError(err).message;
      }
    }
    const bad = Object.entries(checks).filter(([, v]) => v !== 'ok');
    if (bad.length === 0) return c.json({ status: 'ok', ...checks });
    const reason = bad.map(([k, v]) => `${k}: ${v}`).join('; ');
    return c.json({ status: 'unavailable', reason, ...checks }, 503);
  });
  return app;
}

/** `/metrics`: the registry in Prometheus text format. */
export function metricsApi(metrics: Metrics): Hono {
  const app = new Hono();
  app.get('/', async (c) => c.body(await metrics.text(), 200, { 'Content-Type': metrics.contentType }));
  return app;
}
