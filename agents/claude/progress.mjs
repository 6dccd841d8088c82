// What one SDK turn of the Claude agent has said so far (docs/AGENTS.md, "Drafts and tool lines"): the
// texts the model wrote, before and between its tool calls, and a status line per tool call. The draft
// shows both as they stream; the final answer keeps every text (not only the one after the last tool call)
// and no status line.
import { isAbsolute, relative } from 'node:path';

/** Marks a tool status line in a draft. */
export const TOOL_MARK = '⚙';

/** The one-line status of a tool call: the tool (MCP prefix dropped) and what it works on. */
export function toolLine(name, input, cwd) {
  const short = String(name).replace(/^mcp__.+?__/, '');
  const raw = [
    input?.file_path,
    input?.notebook_path,
    input?.path,
    input?.pattern,
    input?.command,
    input?.description,
  ].find((v) => typeof v === 'string' && v.trim() !== '');
  let what = raw === undefined ? '' : raw.trim().split('\n')[0];
  if (what !== '' && cwd && isAbsolute(what)) {
    const rel = relative(cwd, what);
    if (rel !== '' && !rel.startsWith('..')) what = rel;
  }
  if (what.length > 80) what = `${what.slice(0, 79)}…`;
  return `${TOOL_MARK} ${short}${what ? ` ${what}` : ''}`;
}

/** The progress of one SDK turn (from one `result` to the next). */
export class Progress {
  /** Streamed parts, in order: text blocks and tool calls. */
  #parts = [];
  /** Texts of the assistant messages, each content block once. */
  #said = [];
  #seen = new Set();

  constructor(cwd) {
    this.cwd = cwd;
  }

  /** A new SDK turn starts (after a result). */
  reset() {
    this.#parts = [];
    this.#said = [];
    this.#seen = new Set();
  }

  /**
   * Texts the turn wrote before a crash cut it off (resume.mjs): the turn goes on after them, and its
   * draft and answer keep them.
   */
  carry(texts) {
    for (const text of texts) {
      this.#said.push(text);
      this.#parts.push({ kind: 'text', text });
    }
  }

  /** A stream event (includePartialMessages). True when the draft changed. */
  event(ev) {
    if (ev.type === 'content_block_start') {
      const b = ev.content_block;
      if (b?.type === 'text') this.#parts.push({ kind: 'text', text: b.text ?? '' });
      if (b?.type !== 'tool_use') return false;
      this.#parts.push({ kind: 'tool', id: b.id, line: toolLine(b.name, b.input, this.cwd) });
      return true;
    }
    if (ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta') {
      let last = this.#parts.at(-1);
      if (last?.kind !== 'text') this.#parts.push((last = { kind: 'text', text: '' }));
      last.text += ev.delta.text;
      return true;
    }
    return false;
  }

  /**
   * An assistant message: its texts are said; its tool calls' status lines learn what they work on. True
   * when a status line changed.
   */
  assistant(message) {
    const content = Array.isArray(message?.content) ? message.content : [];
    let changed = false;
    for (const [i, b] of content.entries()) {
      const key = `${message.id ?? ''}:${i}:${b.type}:${b.type === 'text' ? b.text : (b.id ?? '')}`;
      if (this.#seen.has(key)) continue;
      this.#seen.add(key);
      if (b.type === 'text' && typeof b.text === 'string' && b.text.trim() !== '')
        this.#said.push(b.text.trim());
      if (b.type === 'tool_use') {
        const part = this.#parts.find((p) => p.kind === 'tool' && p.id === b.id);
        const line = toolLine(b.name, b.input, this.cwd);
        if (part?.line === line) continue;
        if (part) part.line = line;
        else this.#parts.push({ kind: 'tool', id: b.id, line });
        changed = true;
      }
    }
    return changed;
  }

  /** The draft: texts and tool status lines so far. */
  draft() {
    return this.#parts
      .map((p) => (p.kind === 'text' ? p.text.trim() : p.line))
      .filter((t) => t !== '')
      .join('\n\n');
  }

  /** The text streamed so far, without status lines (what an interrupted turn answers with). */
  text() {
    return this.#parts
      .filter((p) => p.kind === 'text')
      .map((p) => p.text.trim())
      .filter((t) => t !== '')
      .join('\n\n');
  }

  /** Every text the model wrote in this SDK turn, in order; `fallback` (the result's text) when none. */
  answer(fallback) {
    return this.#said.length > 0 ? this.#said.join('\n\n') : (fallback ?? '');
  }
}
