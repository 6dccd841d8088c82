// The turns of the Claude agent's one SDK session (docs/PROTOCOL.md, "Steering"; docs/AGENTS.md, "How a
// turn ends"): which stdin lines the turn in progress answers, when it is over, and what happens to it when
// gated steers it.
//
// - A line that arrives during a turn waits; the waiting lines go together as the next turn.
// - A line with `"steer": true` is pushed into the running query at once: Claude Code shows it to the model
//   within the turn (folded in at the next tool boundary) or right after it, and one block answers both.
// - A turn is over when the CLI's results have answered every user message it pushed (a result names them:
//   `user_message_uuids`), or when the session goes idle with every message of the turn seen by the CLI. Nothing else the CLI says holds a turn
//   open (messages.mjs).
// - `{"type":"interrupt","turn":k}` stops the turn in progress through the SDK's `interrupt()` when it
//   answers turn k or an earlier one; its block carries `"interrupted": true` and the text streamed so far.
//   Waiting lines up to k are answered by that same block (they are never started).
// - "Prompt is too long": Claude Code compacts the session itself and retries; when it did not, the agent
//   asks for `/compact` and sends the turn again, once. Either way the block says `"compacted": true`.

import { randomUUID } from 'node:crypto';

/**
 * A user message of the SDK's streaming input, with a uuid of its own: the transcript keeps it as the
 * entry's uuid, so a later run can tell which prompts the session holds (resume.mjs), and the CLI's results
 * and lifecycle frames name it.
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

/** The user message uuids a result answers, or null when the CLI does not say. */
function coveredBy(msg) {
  if (Array.isArray(msg?.user_message_uuids) && msg.user_message_uuids.length > 0)
    return msg.user_message_uuids.filter((u) => typeof u === 'string');
  return typeof msg?.user_message_uuid === 'string' ? [msg.user_message_uuid] : null;
}

/** What a session that cannot be compacted answers its first failed turn with (`reason`: why). */
export function stuckNotice(reason) {
  return (
    `This conversation has grown too long for the model, and compacting it failed (${reason}). ` +
    "Send /new to start a fresh conversation (the files in the group's folder stay)."
  );
}

/** What later turns of that session are answered with, without asking the model again. */
export const STUCK_AGAIN =
  'This conversation is still too long for the model to go on, and it cannot be compacted: send /new to start afresh.';

/** True for an API refusal of a context over the model's window. */
export function promptTooLong(text) {
  return /prompt is too long/i.test(text ?? '');
}

/**
 * The turn bookkeeping of one run. `push(message, ids)` feeds the SDK's input stream (`ids`: the gated
 * message ids the message carries), `interrupt` calls the query's `interrupt()` (resolving to its
 * receipt), `answer(result, block)` prints the block that ends a turn (the caller adds session id, usage
 * and actions; `result` is null when no SDK result ends it), `log` writes a line to stderr.
 */
export class TurnBook {
  /** Lines read while a turn is in progress: the next turn, together. */
  #waiting = [];
  /** The turn in progress, or null. */
  #current = null;
  /** Uuids of messages an interrupt left queued in the CLI: their results are dropped (already answered). */
  #orphans = new Set();
  #inputEnded = false;
  /** Why the session cannot be compacted (its turns are then answered without the model), or null. */
  #stuck = null;

  /**
   * `stuck`: the reason a session was found not to compact in an earlier run (or null); `onStuck(reason)`
   * notes it when this run finds it.
   */
  constructor({ push, interrupt, answer, end, log, stuck = null, onStuck = () => {} }) {
    this.#stuck = stuck;
    this.onStuck = onStuck;
    this.push = push;
    this.interrupt = interrupt;
    this.answer = answer;
    this.end = end;
    this.log = log;
  }

  /** A turn is in progress (or the CLI still owes results). */
  get busy() {
    return this.#current !== null || this.#orphans.size > 0;
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
      this.#send(cur, line.prompt, idsOf([line]));
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

  /** A compaction failed (a `status` message with `compact_result: 'failed'`); `reason` is its error. */
  compactFailed(reason) {
    if (this.#current) this.#current.compactError = String(reason || 'compaction failed');
  }

  /**
   * A `command_lifecycle` frame: the CLI queued, started, completed or cancelled the user message `uuid`.
   * A message it saw is one its next idle accounts for; a cancelled one is owed no result.
   */
  lifecycle(uuid, state) {
    if (this.#orphans.has(uuid) && (state === 'completed' || state === 'cancelled')) {
      this.#orphans.delete(uuid);
      return this.#next();
    }
    const cur = this.#current;
    if (!cur?.owed.has(uuid)) return;
    cur.seen.add(uuid);
    if (state !== 'cancelled') return;
    cur.owed.delete(uuid);
    if (cur.results > 0 && cur.owed.size === 0) this.#finish(cur.last, '', false);
  }

  /**
   * The session went idle: the CLI has nothing left to do. The turn in progress is over once the CLI has
   * seen every message it pushed (an idle that predates one of them is the end of an earlier turn).
   */
  idle() {
    this.#orphans.clear();
    const cur = this.#current;
    if (cur === null || ![...cur.owed].every((u) => cur.seen.has(u))) return this.#next();
    if (cur.interrupted !== null) return this.#closeInterrupted(cur.last);
    if (cur.results === 0) {
      this.log('the session went idle without answering the turn');
      return this.#close(null, {
        status: 'error',
        failed: true,
        text: 'Claude Code stopped without answering the turn',
      });
    }
    this.#finish(cur.last, '', false);
  }

  /** The turn in progress cannot go on (`text`: why): it is answered with that error. */
  fail(text) {
    if (this.#current === null) return;
    this.#close(this.#current.last, { status: 'error', failed: true, text });
  }

  /**
   * A `result` message. `text` is its answer (or error) text, `failed` true for an error result.
   * Returns 'done' when the turn's block was printed, 'wait' when more results belong to it, 'failed' when
   * the caller decides (an error the turn does not recover from).
   */
  result(msg, text, failed) {
    const covered = coveredBy(msg);
    const cur = this.#current;
    const orphaned = covered?.filter((u) => this.#orphans.delete(u)) ?? [];
    if (cur === null || (covered !== null && !covered.some((u) => cur.owed.has(u)))) {
      if (orphaned.length > 0 || (cur === null && covered === null && this.#orphans.size > 0)) {
        if (covered === null) this.#orphans.delete(this.#orphans.values().next().value);
        this.log('a result for a message an interrupt had left queued: dropped (its turn is answered)');
      }
      this.#next();
      return 'wait';
    }
    cur.results += 1;
    cur.last = msg;
    // An older CLI that names no message answers one message a result, oldest first.
    for (const u of covered ?? [...cur.owed].slice(0, 1)) cur.owed.delete(u);
    if (cur.interrupted !== null) return this.#closeInterrupted(msg);
    if (failed && promptTooLong(text) && (cur.retried || cur.compactError !== null)) {
      // Compacting did not make it fit: the session cannot go on. Said once, with the way out.
      this.#stuck = cur.compactError ?? 'the context is still too long after compacting';
      this.log(`the session cannot be compacted (${this.#stuck}): answering its turns with /new`);
      this.onStuck(this.#stuck);
      this.#close(msg, { status: 'error', failed: true, text, notice: stuckNotice(this.#stuck) });
      return 'failed';
    }
    if (failed && promptTooLong(text) && !cur.compacted && !cur.retried) {
      // Claude Code did not compact on its own: ask for it, then send the same turn again, once.
      cur.retried = true;
      cur.compacted = true;
      this.log('prompt too long: compacting the session and retrying the turn once');
      cur.compactUuid = this.#send(cur, '/compact', []);
      this.#send(cur, cur.prompt, cur.ids);
      return 'wait';
    }
    if (covered !== null && covered.every((u) => u === cur.compactUuid)) {
      // The /compact the agent asked for: not an answer. Its failure is the turn's.
      return failed ? this.#finish(msg, text, true) : 'wait';
    }
    if (failed) return this.#finish(msg, text, failed);
    if (text.trim() !== '') cur.texts.push(text);
    cur.draft = '';
    // A steered message not folded into this result gets one of its own (or the session's idle says it got
    // none). `queued_turn_count` does not tell: it counts none for a message steered mid-stream.
    if (cur.owed.size === 0) return this.#finish(msg, text, false);
    return 'wait';
  }

  /** Pushes a user message for the turn `cur`, which then owes its result; returns its uuid. */
  #send(cur, text, ids) {
    const m = userMessage(text);
    cur.owed.add(m.uuid);
    this.push(m, ids);
    return m.uuid;
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

  /** An interrupt ends the turn with one block, whatever was steered into it: the text it had. */
  #closeInterrupted(msg) {
    const cur = this.#current;
    const said = [...cur.texts, cur.draft].join('\n\n').trim();
    this.#close(msg, { status: 'ok', result: said === '' ? null : said, interrupted: true });
    return 'done';
  }

  /** Prints the block that answers the turn in progress and starts the next one. */
  #close(msg, block) {
    const cur = this.#current;
    this.#current = null;
    const turn = cur.interrupted ?? cur.turn;
    this.answer(msg, {
      ...block,
      ...(turn !== null ? { turn } : {}),
      ...(cur.compacted ? { compacted: true } : {}),
    });
    this.#next();
  }

  /** The next waiting turn, if nothing holds it back; else the end, once input ended. */
  #next() {
    this.#start();
    this.#finishIfDone();
  }

  #start() {
    if (this.busy || this.#waiting.length === 0) return;
    const batch = this.#waiting.splice(0);
    if (this.#stuck !== null) {
      // Every request of this session is refused and compaction fails: the model is not asked again.
      const turn = maxTurn(batch);
      this.answer(null, {
        status: 'error',
        failed: true,
        text: `prompt too long: ${this.#stuck}`,
        notice: STUCK_AGAIN,
        ...(turn !== null ? { turn } : {}),
      });
      return this.#start();
    }
    const cur = {
      turn: maxTurn(batch),
      prompt: batch.map((l) => l.prompt).join('\n'),
      ids: idsOf(batch),
      /** Uuids of the user messages pushed for this turn whose result has not come. */
      owed: new Set(),
      /** Uuids of those the CLI has queued or started (lifecycle frames). */
      seen: new Set(),
      compactUuid: null,
      compactError: null,
      results: 0,
      last: null,
      texts: [],
      draft: '',
      interrupted: null,
      compacted: false,
      retried: false,
    };
    this.#current = cur;
    this.#send(cur, cur.prompt, cur.ids);
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
      if (cur.results > 0) {
        // The turn already has its result: only steered messages' answers were still awaited.
        this.#orphanOwed(cur);
        return this.#closeInterrupted(cur.last);
      }
      this.log(`interrupting turn ${cur.turn ?? '?'} (asked for turn ${k})`);
      this.interrupt().then(
        (receipt) => {
          // Messages the CLI still holds run anyway (steered ones): their results are not this turn's.
          for (const u of receipt?.still_queued ?? []) {
            if (this.#current === cur) cur.owed.delete(u);
            this.#orphans.add(u);
          }
        },
        (err) => this.log(`interrupt failed: ${err instanceof Error ? err.message : String(err)}`),
      );
      return;
    }
    if (dropped.length > 0) this.answer(null, { status: 'ok', result: null, interrupted: true, turn: k });
    this.#start();
  }

  /** The messages `cur` still owes a result move to the orphans: the CLI answers them, nobody waits. */
  #orphanOwed(cur) {
    for (const u of cur.owed) this.#orphans.add(u);
    cur.owed.clear();
  }

  #finishIfDone() {
    if (this.finished) this.end();
  }
}
