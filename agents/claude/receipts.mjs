// Tool calls reported to gated and the receipts it hands back (docs/PROTOCOL.md, "Tool calls and receipts").
// After every tool call the agent prints a `tool_result` block (the ask it ran after, the size and SHA-256 of
// its output or its error, and what the turn spent since the last report); gated seals the call's record and
// answers with a `receipt` line, which the PostToolUse hook hands to the model beside the tool's result, so
// that the model can cite it. A receipt that does not come within RECEIPT_WAIT_MS is given up (the call's
// result still reaches the model).
import { createHash } from 'node:crypto';

/** How long a hook waits for gated's receipt line. */
export const RECEIPT_WAIT_MS = Number(process.env.GATED_CLAUDE_RECEIPT_MS ?? 10_000);

/** Bytes and SHA-256 (hex) of a tool's output as the model gets it: a string as it is, anything else as JSON. */
export function digestOf(output) {
  const text = typeof output === 'string' ? output : (JSON.stringify(output ?? null) ?? 'null');
  return { bytes: Buffer.byteLength(text), sha256: createHash('sha256').update(text).digest('hex') };
}

/** The words the model reads beside a tool's result. */
export function receiptNote(receipt) {
  return `gated receipt of this tool call: ${receipt} (cite it to prove the call ran as recorded)`;
}

/** Tool calls reported and the receipts gated answered, by the call's id. */
export class Receipts {
  #emit;
  #waiting = new Map();
  #count = 0;

  constructor(emit) {
    this.#emit = emit;
  }

  /**
   * Reports the end of call `id` (an ask id; null: a call gated was never asked about, then `tool` and
   * `input` name it). Resolves with the receipt, or null when none came in time.
   */
  report(id, { tool, input, output, error, usage }) {
    const callId = id ?? `local-${++this.#count}`;
    const digest = error === undefined ? digestOf(output) : {};
    const result = {
      id: callId,
      ...(id === null ? { tool, input } : {}),
      ...digest,
      ...(error !== undefined ? { error: String(error).slice(0, 2000) } : {}),
    };
    const receipt = new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(callId);
        resolve(null);
      }, RECEIPT_WAIT_MS);
      this.#waiting.set(callId, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
    this.#emit({ status: 'ok', result: null, tool_result: result, ...(usage ? { usage } : {}) });
    return receipt;
  }

  /** A `receipt` line from gated (unknown ids are ignored). */
  line(line) {
    const answer = this.#waiting.get(line.id);
    this.#waiting.delete(line.id);
    if (typeof line.receipt === 'string') answer?.(line.receipt);
  }
}
