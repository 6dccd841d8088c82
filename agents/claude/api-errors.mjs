// Failures of the Claude API as the agent meets them: which ones a later try may not meet (the run is
// retried rather than answered), and how to tell the chat why (docs/PROTOCOL.md, "Retry later").

/** An API failure that a later try may not meet (the run is retried rather than answered). */
export function transient(text) {
  return /overloaded|\b529\b|\b5\d\d\b|rate.?limit|\b429\b|ECONNREFUSED|ETIMEDOUT|ECONNRESET|fetch failed|connection error/i.test(
    text ?? '',
  );
}

/**
 * Why the API could not serve a turn, in words for the chat (gated's final message quotes it when every
 * retry failed): the HTTP status when the error names one.
 */
export function apiTrouble(text) {
  const t = text ?? '';
  const status = /\b(429|5\d\d)\b/.exec(t)?.[1];
  const http = status ? ` (HTTP ${status})` : '';
  if (/overloaded|\b529\b/i.test(t)) return `the Claude API is overloaded${http}`;
  if (/rate.?limit|\b429\b/i.test(t)) return `the Claude API's rate limit was reached${http}`;
  if (status) return `the Claude API failed${http}`;
  return 'the Claude API could not be reached';
}
