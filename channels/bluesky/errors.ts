import { XRPCError } from '@atproto/api';
import { DeliveryError } from '../../core/errors.js';

/** Wait used when a 429 carries no usable reset header. */
const DEFAULT_RATE_LIMIT_WAIT_MS = 60_000;

/** True when an error means our session is gone (expired, revoked, never made) rather than the request bad. */
export function isAuthError(err: unknown): boolean {
  if (!(err instanceof XRPCError)) return false;
  return (
    err.status === 401 ||
    ['ExpiredToken', 'InvalidToken', 'AuthenticationRequired', 'AuthMissing'].includes(err.error)
  );
}

/**
 * How long a 429 asks us to wait. `retry-after` (seconds from now) wins when present: it does not depend on
 * our clock agreeing with the server's. Otherwise `ratelimit-reset`, the epoch second when the window
 * reopens (what atproto servers send). At least one second, so a reset in the past never spins.
 */
export function retryAfterMs(
  headers: Record<string, string | undefined> | undefined,
  now: number = Date.now(),
): number {
  const after = headers?.['retry-after']?.trim();
  if (after && Number(after) >= 0) return Math.max(1000, Number(after) * 1000);
  const reset = Number(headers?.['ratelimit-reset']);
  if (Number.isFinite(reset) && reset > 0) return Math.max(1000, reset * 1000 - now);
  return DEFAULT_RATE_LIMIT_WAIT_MS;
}

/**
 * Sorts a failed Bluesky call into what delivery should do: 429 → rate_limited (wait for the reset), 5xx,
 * network failures → transient, any other 4xx (400 invalid record, 401, 403, 404 gone) → permanent.
 * The message names the XRPC error, never a token.
 */
export function toDeliveryError(err: unknown, now: number = Date.now()): DeliveryError {
  if (err instanceof DeliveryError) return err;
  if (err instanceof XRPCError) {
    // The library folds unlisted HTTP codes into its enum (408 becomes 400, 599 becomes 500).
    const status: number = err.status;
    const what = `bluesky ${status}${err.error ? ` ${err.error}` : ''}: ${err.message}`;
    if (status === 429)
      return new DeliveryError('rate_limited', what, retryAfterMs(err.headers, now), status);
    // status 1 is the library's "no response" (connection refused, reset, DNS), 2 an unreadable answer.
    if (status >= 500 || status < 100) return new DeliveryError('transient', what, undefined, status);
    return new DeliveryError('permanent', what, undefined, status);
  }
  const e = err instanceof Error ? err : new Error(String(err));
  return new DeliveryError('transient', `bluesky: ${e.message}`);
}

/**
 * The wait before the next notification poll after `failures` failed ones in a row: a 429's own reset
 * time, otherwise the interval doubled per failure up to `maxMs`.
 */
export function pollDelayAfter(err: DeliveryError, failures: number, pollMs: number, maxMs: number): number {
  if (err.failure === 'rate_limited' && err.retryAfterMs !== undefined) return err.retryAfterMs;
  return Math.min(maxMs, pollMs * 2 ** Math.min(failures, 16));
}
