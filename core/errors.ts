/**
 * The few typed errors that cross module edges. Each carries machine-readable fields and never a secret
 * (no tokens, no URLs with credentials, no message bodies beyond what the operator already sees).
 */

/** Bad operator input (CLI arguments, a route row, a folder name). The CLI prints it on one line, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Why one delivery attempt of an outbound part failed, and what to do about it. */
export type DeliveryFailure = 'rate_limited' | 'transient' | 'permanent';

/**
 * Thrown by a channel's send when the platform refused a part. `rate_limited` waits `retryAfterMs` and
 * tries again; `transient` (5xx, network) retries with capped backoff; `permanent` (400, 403, chat gone)
 * is recorded on the row and never retried.
 */
export class DeliveryError extends Error {
  override readonly name = 'DeliveryError';
  constructor(
    readonly failure: DeliveryFailure,
    message: string,
    readonly retryAfterMs?: number,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** Turns anything thrown into an Error, so logs and rows always get a message. */
export function coerceError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new Error(typeof err === 'string' ? err : JSON.stringify(err));
}
