// The turns of the Claude agent's one SDK session (docs/PROTOCOL.md, "Steering"): which stdin lines the
// turn in progress answers, and what happens to it when gated steers it.
//
// - A line that arrives during a turn waits; the waiting lines go together as the next turn.
// - A line with `"steer": true` is pushed into the running query at once: Claude Code shows it to the model
//   within the turn (folded in at the next tool boundary) or right after it, and one block answers both.
// - `{"type":"interrupt","turn":k}` stops the turn in progress through the SDK's `interrupt()` when it
//   answers turn k or an earlier one; its block carries `"interrupted": true` and the text streamed so far.
//   Waiting lines up to k are answered by that same block (they are never started).
// - "Prompt is too long": Claude Code compacts the session itself and retries; when it did not, the agent
//   asks for `/compact` and sends the turn again, once. Either way the block says `"compacted": true`.

import { randomUUID } from 'node:crypto';

/** How long after a result the CLI may take to start a steered message as a turn of its own. */
const SETTLE_MS = 1500;

/**
 * A user message of the SDK's streaming input, with a uuid of its own: the transcript keeps it as the
 * entry's uuid, so a later run can tell which prompts the session holds (resume.mjs).
 */
function userMessage(text) {
  return {
    type: 'user',
    message: { role: 'user', content: text },
    parent_tool_use_id: null,
    uuid: randomUUID(),
  };
}

/** The message ids of stdin lines. */
function idsOf(lines) {
  return lines
    .flatMap((l) => (Array.isArray(l.messages) ? l.messages.map((m) => m?.id) : []))
    .filter(Number.isInteger);
}

/** The highest integer `turn` of `lines`, or null when none numbers its turn. */
function maxTurn(lines) {
  const turns = lines.map((l) => l.turn).filter((t) => Number.isInteger(t));
  return turns.length > 0 ? Math.max(...turns) : null;
}

/** True for an API refusal of a context over the model's window. */
export function promptTooLong(text) {
  return /prompt is too long/i.test(text ?? '');
}

/**
 * The turn bookkeeping of one run. `push(message, ids)` feeds the SDK's input stream (`ids`: the gated
 * message ids the message carries), `interrupt` calls the query's
 * `interrupt()` (resolving to its receipt), `answer(result, block)` prints the block that ends a turn (the
 * caller adds session id, usage and actions), `log` writes a line to stderr.
 */
export class TurnBook {
  /** Lines read while a turn is in progress: the next turn, together. */
  #waiting = [];
  /** The turn in progress, or null. */
  #current = null;
  /** Results still to come for messages an interrupt left queued in the CLI (dropped: already answered). */
  #orphans = 0;
  #inputEnded = false;

  constructor({ push, interrupt, answer, end, log }) {
    this.push = push;
    this.interrupt = interrupt;
    this.answer = answer;
    this.end = end;
    this.log = log;
  }

  /** A turn is in progress (or the CLI still owes results). */
  get busy() {
    return this.#current !== null || this.#orphans > 0;
  }

  /** The turn the drafts of the turn in progress speak for. */
  get turn() {
    return this.#current?.turn ?? null;
  }

  /** Input ended: once nothing is in progress or waiting, the SDK's input ends too. */
  inputEnded() {
    this.#inputEnded = true;
    this.#finishIfDone();
  }

  /** True once input ended and every turn was answered. */
  get finished() {
    return this.#inputEnded && !this.busy && this.#waiting.length === 0;
  }

  /** A parsed stdin line (never `end`). */
  line(line) {
    if (line.type === 'interrupt') return this.#interrupt(line.turn);
    if (typeof line.prompt !== 'string') return;
    const cur = this.#current;
    if (line.steer === true && cur !== null && cur.interrupted === null) {
      cur.turn = Math.max(cur.turn ?? 0, line.turn ?? 0) || cur.turn;
      cur.pending += 1;
      this.activity();
      this.push(userMessage(line.prompt), idsOf([line]));
      return;
    }
    this.#waiting.push(line);
    this.#start();
  }

  /** Text the model streamed in the turn in progress (a draft). */
  stream(text) {
    if (this.#current) this.#current.draft = text;
  }

  /** Claude Code compacted the session (a `compact_boundary`). */
  compacted() {
    if (this.#current) this.#current.compacted = true;
  }

  /** Any other message from the SDK: the CLI is at work, so a steered message became a turn of its own. */
  activity() {
    const cur = this.#current;
    if (cur?.settle) {
      clearTimeout(cur.settle);
      cur.settle = null;
    }
  }

  /**
   * A `result` message. `text` is its answer (or error) text, `failed` true for an error result.
   * Returns 'done' when the turn's block was printed, 'wait' when more results belong to it, 'failed' when
   * the caller decides (an error the turn does not recover from).
   */
  result(msg, text, failed) {
    if (this.#current === null) {
      if (this.#orphans > 0) {
        this.#orphans -= 1;
        this.log('a result for a message an interrupt had left queued: dropped (its turn is answered)');
        this.#finishIfDone();
      }
      return 'wait';
    }
    const cur = this.#current;
    cur.pending -= 1;
    if (cur.interrupted !== null) {
      // An interrupt ends the turn with one result, whatever was steered into it.
      const said = [...cur.texts, cur.draft].join('\n\n').trim();
      this.#close(msg, { status: 'ok', result: said === '' ? null : said, interrupted: true });
      return 'done';
    }
    if (failed && promptTooLong(text) && !cur.compacted && !cur.retried) {
      // Claude Code did not compact on its own: ask for it, then send the same turn again, once.
      cur.retried = true;
      cur.compacted = true;
      cur.skip += 1;
      cur.pending += 2;
      this.log('prompt too long: compacting the session and retrying the turn once');
      this.push(userMessage('/compact'), []);
      this.push(userMessage(cur.prompt), cur.ids);
      return 'wait';
    }
    if (cur.skip > 0) {
      cur.skip -= 1;
      return cur.pending > 0 ? 'wait' : this.#finish(msg, text, failed);
    }
    if (failed) return this.#finish(msg, text, failed);
    if (text.trim() !== '') cur.texts.push(text);
    cur.draft = '';
    if (cur.pending <= 0) return this.#finish(msg, text, failed);
    // A steered message is owed a result, unless Claude Code folded it into this one: if the CLI does not
    // start it as a turn of its own soon, this turn is complete.
    cur.settle = setTimeout(() => {
      cur.settle = null;
      if (this.#current !== cur) return;
      cur.pending = 0;
      this.#finish(msg, text, false);
    }, SETTLE_MS);
    return 'wait';
  }

  #finish(msg, text, failed) {
    const cur = this.#current;
    if (failed) {
      this.#close(msg, { status: 'error', failed: true, text });
      return 'failed';
    }
    this.#close(msg, { status: 'ok', result: cur.texts.join('\n\n') });
    return 'done';
  }

  /** Prints the block that answers the turn in progress and starts the next one. */
  #close(msg, block) {
    const cur = this.#current;
    this.#current = null;
    clearTimeout(cur.settle);
    const turn = cur.interrupted ?? cur.turn;
    this.answer(msg, {
      ...block,
      ...(turn !== null ? { turn } : {}),
      ...(cur.compacted ? { compacted: true } : {}),
    });
    this.#start();
    this.#finishIfDone();
  }

  #start() {
    if (this.busy || this.#waiting.length === 0) return;
    const batch = this.#waiting.splice(0);
    const prompt = batch.map((l) => l.prompt).join('\n');
    const ids = idsOf(batch);
    this.#current = {
      turn: maxTurn(batch),
      prompt,
      ids,
      pending: 1,
      texts: [],
      draft: '',
      interrupted: null,
      compacted: false,
      retried: false,
      skip: 0,
      settle: null,
    };
    this.push(userMessage(prompt), ids);
  }

  #interrupt(k) {
    if (!Number.isInteger(k)) return;
    // Waiting lines up to k are never started: the interrupted block answers them.
    const dropped = this.#waiting.filter((l) => Number.isInteger(l.turn) && l.turn <= k);
    this.#waiting = this.#waiting.filter((l) => !dropped.includes(l));
    const cur = this.#current;
    if (cur !== null && (cur.turn === null || cur.turn <= k)) {
      if (cur.interrupted !== null) return;
      cur.interrupted = k;
      clearTimeout(cur.settle);
      if (cur.settle) {
        // The turn already has its result: only the steered messages' answers were still awaited.
        cur.settle = null;
        cur.pending = 0;
        return this.result(null, '', false);
      }
      this.log(`interrupting turn ${cur.turn ?? '?'} (asked for turn ${k})`);
      this.interrupt().then(
        (receipt) => {
          // Messages the CLI still holds run anyway (steered ones): their results are not this turn's.
          const left = receipt?.still_queued?.length ?? 0;
          if (left > 0) this.#orphans += left;
        },
        (err) => this.log(`interrupt failed: ${err instanceof Error ? err.message : String(err)}`),
      );
      return;
    }
    if (dropped.length > 0) this.answer(null, { status: 'ok', result: null, interrupted: true, turn: k });
    this.#start();
  }

  #finishIfDone() {
    if (this.finished) this.end();
  }
}
