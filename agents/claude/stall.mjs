// The bound on a turn that makes no progress (docs/AGENTS.md, "How a turn ends"): while a turn is in
// progress, some message of the CLI's work (messages.mjs: `work`, `result`, `state`, `lifecycle`) must come
// at least every `ms`, unless the wait is someone else's: a person deciding a tool's approval (gated bounds
// that), a tool call that runs (the tool's own timeout bounds it) or the CLI asking for a permission. A turn
// that stays silent longer ends with a named error instead of holding the run until gated's hard timeout.

/** How often the bound is checked: a stall is noticed at most this late. */
const CHECK_MS = 1000;

/** Watches one run's turns for silence. `busy()` says whether a turn is in progress. */
export class StallWatch {
  #last = Date.now();
  /** What the turn waits on that is not the CLI's to finish (asks, running tools, a permission). */
  #holds = new Set();
  #timer = null;

  /** `onStall(seconds)` is called once when the turn in progress was silent for `ms`. */
  constructor(ms, busy, onStall) {
    this.ms = ms;
    this.busy = busy;
    this.onStall = onStall;
    if (!(ms > 0)) return;
    this.#timer = setInterval(() => this.#check(), Math.min(CHECK_MS, ms));
    this.#timer.unref();
  }

  /** The CLI showed progress. */
  progress() {
    this.#last = Date.now();
  }

  /** The turn waits on `key` (an ask, a tool call): no bound until it is released. */
  hold(key) {
    this.#holds.add(key);
  }

  /** `key` no longer holds the turn; the silence is counted from now. */
  release(key) {
    if (this.#holds.delete(key)) this.#last = Date.now();
  }

  /** Every hold whose key starts with `prefix` is released (a turn's tool calls, once it has a result). */
  releaseAll(prefix) {
    for (const key of [...this.#holds]) if (key.startsWith(prefix)) this.release(key);
  }

  stop() {
    clearInterval(this.#timer);
    this.#timer = null;
  }

  #check() {
    if (!this.busy() || this.#holds.size > 0) {
      this.#last = Date.now();
      return;
    }
    if (Date.now() - this.#last < this.ms) return;
    this.stop();
    this.onStall(Math.round(this.ms / 1000));
  }
}
