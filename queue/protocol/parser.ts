/**
 * The streaming reader of an agent's stdout (docs/PROTOCOL.md). Only blocks between a whole line
 * `---GATED_OUTPUT_START---` and a whole line `---GATED_OUTPUT_END---` count; everything else is noise.
 *
 * Hazards handled here, because agents print whatever they like and a pipe splits it anywhere:
 * - markers split across chunks, CRLF line ends, whitespace around a marker;
 * - a START inside an open block discards the unfinished block and opens a new one;
 * - an END with no open block is noise;
 * - memory stays bounded: outside a block a line is kept only while it could still be a marker, and a
 *   block larger than `maxBlockBytes` is dropped (and counted) while the parser keeps looking for markers;
 * - nothing here throws on any input; bad blocks are reported through `onProblem`.
 */

import { MAX_BLOCK_DEPTH, nestsWithin } from './bounds.js';
import {
  toAsk,
  toMemoryQuery,
  toToolReport,
  type MemoryQuery,
  type ToolAsk,
  type ToolReport,
} from './tool-blocks.js';

export type { MemoryQuery, ToolAsk, ToolReport } from './tool-blocks.js';

/** The start marker line of a block. */
export const OUTPUT_START = '---GATED_OUTPUT_START---';
/** The end marker line of a block. */
export const OUTPUT_END = '---GATED_OUTPUT_END---';

/** What one block held, once parsed as JSON. */
export interface OutputBlock {
  status: 'ok' | 'error';
  result: string | null;
  newSessionId?: string;
  error?: string;
  /** The turn this block answers, with every earlier one (docs/PROTOCOL.md); absent: the oldest open turn. */
  turn?: number;
  /** A draft of the turn in progress: answers nothing and is never stored as a reply. */
  partial?: boolean;
  /** Paths (relative to the group's folder) of files to send with this block's reply. */
  files?: string[];
  /** What producing this block cost, as the agent reports it; summed per run on session_log. */
  usage?: BlockUsage;
  /** What the agent asks gated to do besides answering, as written (checked by queue/actions/). */
  actions?: unknown;
  /** A question before running a tool (docs/APPROVALS.md): answers no turn; gated writes a permission line. */
  ask?: ToolAsk;
  /** How a tool call ended (docs/PROTOCOL.md, "Tool calls and receipts"): answers no turn; gated seals it. */
  toolResult?: ToolReport;
  /** A question to memory (docs/MEMORY.md): answers no turn; gated writes a `memory` line. */
  memory?: MemoryQuery;
  /** The agent stopped this turn early because gated interrupted it (docs/PROTOCOL.md, "Steering"). */
  interrupted?: boolean;
  /** The agent compacted its session (its context was full) before answering; kept in session_log. */
  compacted?: boolean;
  /**
   * With `status: "error"`: the agent cannot serve its turns now (an overloaded API) and exits without
   * answering; `error` says why, in words for the chat. Answers no turn (docs/PROTOCOL.md, "Retry later").
   */
  retry?: boolean;
}

/**
 * Tokens and cost of one block (malformed fields count as 0); `cost_usd` null when the agent gave none
 * (gated prices the tokens), `model` the model that spent them, when the agent names it.
 */
export interface BlockUsage {
  input_tokens: number;
  output_tokens: number;
  cost_usd: number | null;
  model?: string;
}

/** Why a block (or part of the stream) was not used. */
export type ProblemKind = 'oversize' | 'invalid_json' | 'invalid_shape' | 'unterminated' | 'restarted';

/** Counters of one stream, for logs and session_log. */
export interface ParserStats {
  blocks: number;
  oversize: number;
  invalidJson: number;
  invalidShape: number;
  unterminated: number;
  restarted: number;
  noiseBytes: number;
}

/** Callbacks and limits of a parser. */
export interface ParserOptions {
  /** Largest block body kept, in bytes (default 10 MiB, docs/PROTOCOL.md). */
  maxBlockBytes: number;
  onBlock: (block: OutputBlock) => void;
  onProblem?: (kind: ProblemKind, detail: string) => void;
}

/** A push parser: feed it chunks in order, then `end()`. */
export interface OutputParser {
  push(chunk: Buffer | string): void;
  end(): void;
  readonly stats: ParserStats;
  /** Bytes held right now (the open line and block): stays within maxBlockBytes plus a marker's length. */
  buffered(): number;
}

// The longest line outside a block worth keeping: a marker plus a little slack. Anything longer, once its
// surrounding whitespace is gone, cannot be a marker.
const MARKER_MAX = Math.max(OUTPUT_START.length, OUTPUT_END.length);
const LINE_COMPACT_AT = 1024;

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0b || byte === 0x0c;
}

function trimBytes(buf: Buffer): Buffer {
  let s = 0;
  let e = buf.length;
  while (s < e && isSpace(buf[s]!)) s++;
  while (e > s && isSpace(buf[e - 1]!)) e--;
  return buf.subarray(s, e);
}

function markerOf(line: Buffer): 'start' | 'end' | null {
  const trimmed = trimBytes(line);
  if (trimmed.length > MARKER_MAX) return null;
  const text = trimmed.toString('latin1');
  if (text === OUTPUT_START) return 'start';
  if (text === OUTPUT_END) return 'end';
  return null;
}

/** Checks the JSON shape of a block; returns a reason when it is not a usable block. */
function toBlock(value: unknown): OutputBlock | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const v = value as Record<string, unknown>;
  if (v.status !== 'ok' && v.status !== 'error') return `status must be "ok" or "error"`;
  if (v.result !== undefined && v.result !== null && typeof v.result !== 'string') {
    return 'result must be a string or null';
  }
  const block: OutputBlock = { status: v.status, result: typeof v.result === 'string' ? v.result : null };
  if (typeof v.newSessionId === 'string' && v.newSessionId !== '') block.newSessionId = v.newSessionId;
  if (typeof v.error === 'string') block.error = v.error;
  if (v.turn !== undefined && v.turn !== null) {
    // Strict: a block credited to the wrong turn would mark rows the agent never answered.
    if (typeof v.turn !== 'number' || !Number.isSafeInteger(v.turn) || v.turn < 1) {
      return 'turn must be a positive integer';
    }
    block.turn = v.turn;
  }
  if (v.partial !== undefined && v.partial !== null && v.partial !== false) {
    if (v.partial !== true) return 'partial must be a boolean';
    block.partial = true;
  }
  // Entries that are not strings cannot name a file; they are dropped rather than losing the block's text.
  const files = Array.isArray(v.files) ? v.files.filter((f): f is string => typeof f === 'string') : [];
  if (files.length > 0) block.files = files;
  // Usage is bookkeeping: a malformed one is ignored rather than losing the block's answer.
  if (typeof v.usage === 'object' && v.usage !== null && !Array.isArray(v.usage)) {
    const u = v.usage as Record<string, unknown>;
    // Within what one block could cost: a sum of absurd reports must not become Infinity.
    const num = (x: unknown) =>
      typeof x === 'number' && Number.isFinite(x) && x >= 0 ? Math.min(x, 1e9) : 0;
    block.usage = {
      input_tokens: Math.round(num(u.input_tokens)),
      output_tokens: Math.round(num(u.output_tokens)),
      // Absent: gated prices the tokens by the model's price row (docs/COSTS.md).
      cost_usd: u.cost_usd === undefined || u.cost_usd === null ? null : num(u.cost_usd),
      ...(typeof u.model === 'string' && u.model !== '' ? { model: u.model.slice(0, 200) } : {}),
    };
  }
  // Flags that only describe the block: anything but `true` is read as absent.
  if (v.interrupted === true) block.interrupted = true;
  if (v.compacted === true) block.compacted = true;
  if (v.retry === true && v.status === 'error') block.retry = true;
  // Checked action by action when applied: one bad action must not cost the block its answer.
  if (v.actions !== undefined && v.actions !== null) block.actions = v.actions;
  if (v.ask !== undefined && v.ask !== null) {
    const ask = toAsk(v.ask);
    if (typeof ask === 'string') return `ask: ${ask}`;
    block.ask = ask;
  }
  if (v.tool_result !== undefined && v.tool_result !== null) {
    const report = toToolReport(v.tool_result);
    if (typeof report === 'string') return `tool_result: ${report}`;
    block.toolResult = report;
  }
  if (v.memory !== undefined && v.memory !== null) {
    const query = toMemoryQuery(v.memory);
    if (typeof query === 'string') return `memory: ${query}`;
    block.memory = query;
  }
  return block;
}

/** Creates a parser for one agent's stdout. */
export function createOutputParser(opts: ParserOptions): OutputParser {
  return new StreamParser(opts);
}

/** A block's text as JSON and then as a block, or the problem that makes it unusable. */
function decodeBlock(raw: string): OutputBlock | { kind: ProblemKind; detail: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    return { kind: 'invalid_json', detail: (err as Error).message };
  }
  if (!nestsWithin(parsed, MAX_BLOCK_DEPTH)) {
    return { kind: 'invalid_shape', detail: `nested deeper than ${MAX_BLOCK_DEPTH} levels` };
  }
  const block = toBlock(parsed);
  return typeof block === 'string' ? { kind: 'invalid_shape', detail: block } : block;
}

/**
 * The parser's state: the open block's body (kept only while it fits `maxBlockBytes`) and the current,
 * unfinished line. Outside a block (or in a dropped oversize block) that line is kept only while it could
 * still be a marker; `lineIsNoise` then swallows the rest of it.
 */
class StreamParser implements OutputParser {
  readonly stats: ParserStats = {
    blocks: 0,
    oversize: 0,
    invalidJson: 0,
    invalidShape: 0,
    unterminated: 0,
    restarted: 0,
    noiseBytes: 0,
  };
  private inBlock = false;
  private oversize = false;
  private body: Buffer[] = [];
  private bodyBytes = 0;
  private line: Buffer[] = [];
  private lineBytes = 0;
  private lineIsNoise = false;

  constructor(private readonly opts: ParserOptions) {}

  buffered(): number {
    return this.lineBytes + this.bodyBytes;
  }

  push(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let from = 0;
    for (;;) {
      const nl = buf.indexOf(0x0a, from);
      if (nl < 0) {
        this.growLine(buf.subarray(from));
        return;
      }
      this.finishLine(buf.subarray(from, nl));
      from = nl + 1;
    }
  }

  end(): void {
    if (this.lineBytes > 0 || this.lineIsNoise) this.finishLine(Buffer.alloc(0));
    if (this.inBlock) {
      this.stats.unterminated++;
      this.problem('unterminated', 'stream ended inside a block');
      this.setBlock(false);
    }
  }

  private problem(kind: ProblemKind, detail: string): void {
    try {
      this.opts.onProblem?.(kind, detail);
    } catch {
      // a reporting hook must never break the stream
    }
  }

  private setBlock(open: boolean): void {
    this.inBlock = open;
    this.oversize = false;
    this.body = [];
    this.bodyBytes = 0;
  }

  private openBlock(): void {
    if (this.inBlock) {
      this.stats.restarted++;
      this.problem('restarted', 'START inside an open block: the unfinished block was discarded');
    }
    this.setBlock(true);
  }

  private closeBlock(): void {
    const wasOversize = this.oversize;
    const raw = Buffer.concat(this.body).toString('utf8');
    this.setBlock(false);
    if (wasOversize) {
      this.stats.oversize++;
      this.problem('oversize', `block larger than ${this.opts.maxBlockBytes} bytes discarded`);
      return;
    }
    const block = decodeBlock(raw);
    if ('kind' in block) {
      if (block.kind === 'invalid_json') this.stats.invalidJson++;
      else this.stats.invalidShape++;
      this.problem(block.kind, block.detail);
      return;
    }
    this.stats.blocks++;
    try {
      this.opts.onBlock(block);
    } catch (err) {
      this.problem('invalid_shape', `block handler failed: ${(err as Error).message}`);
    }
  }

  private dropToOversize(): void {
    this.oversize = true;
    this.body = [];
    this.bodyBytes = 0;
  }

  /** A whole line (without its `\n`) has arrived. */
  private finishLine(tail: Buffer): void {
    const parts = this.lineIsNoise ? [] : [...this.line, tail];
    const wasNoise = this.lineIsNoise;
    this.line = [];
    this.lineBytes = 0;
    this.lineIsNoise = false;
    if (wasNoise) return;
    const full = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    const marker = markerOf(full);
    if (marker === 'start') return this.openBlock();
    if (marker === 'end') {
      if (this.inBlock) this.closeBlock();
      return;
    }
    if (!this.inBlock) {
      this.stats.noiseBytes += full.length + 1;
      return;
    }
    if (this.oversize) return;
    if (this.bodyBytes + full.length + 1 > this.opts.maxBlockBytes) return this.dropToOversize();
    // Copy: `full` may be a view into a large chunk that must not stay alive with the block.
    this.body.push(Buffer.from(full), NEWLINE);
    this.bodyBytes += full.length + 1;
  }

  /** Part of a line (no `\n` in it) has arrived. */
  private growLine(piece: Buffer): void {
    if (this.lineIsNoise || piece.length === 0) return;
    this.line.push(Buffer.from(piece));
    this.lineBytes += piece.length;
    if (this.inBlock && !this.oversize) {
      if (this.bodyBytes + this.lineBytes > this.opts.maxBlockBytes) {
        // Too big to keep; from here on this line only matters if it is a marker, which it can be only
        // after its whitespace is trimmed, so compact it like a noise line.
        this.dropToOversize();
        this.compactLine();
      }
      return;
    }
    if (this.lineBytes > LINE_COMPACT_AT) this.compactLine();
  }

  private compactLine(): void {
    const trimmed = trimBytes(Buffer.concat(this.line));
    if (trimmed.length > MARKER_MAX) {
      if (!this.inBlock) this.stats.noiseBytes += this.lineBytes;
      this.lineIsNoise = true;
      this.line = [];
      this.lineBytes = 0;
      return;
    }
    // Markers are compared after trimming, so the trimmed text stands in for the whole line.
    this.line = [Buffer.from(trimmed)];
    this.lineBytes = trimmed.length;
  }
}

const NEWLINE = Buffer.from('\n');

/** A draft block and nothing else (no session id, actions, ask, tool result, memory question or retry). */
export function draftOnly(b: OutputBlock): boolean {
  return (
    b.partial === true &&
    b.newSessionId === undefined &&
    b.actions === undefined &&
    !b.ask &&
    !b.toolResult &&
    !b.memory &&
    !b.retry
  );
}
