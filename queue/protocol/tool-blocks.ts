/**
 * The tool parts of an agent's blocks (docs/PROTOCOL.md): an `ask` before a tool runs and a `tool_result`
 * after it, checked here so that the stream parser keeps to the stream.
 */

/** The `ask` of a block: the agent's id for the question (unique within the run), the tool and its input. */
export interface ToolAsk {
  id: string;
  tool: string;
  input: unknown;
  summary: string | null;
}

/**
 * A tool call's end as the agent reports it: `id` the ask it ran after (or the agent's own id of a call it
 * never asked about, then with `tool` and `input`), the size and SHA-256 of its output, or its error.
 */
export interface ToolReport {
  id: string;
  tool: string | null;
  input: unknown;
  bytes: number | null;
  sha256: string | null;
  error: string | null;
}

/** Longest ask id and tool name accepted: they are handles, stored and echoed. */
const MAX_ASK_FIELD = 256;

/** Checks an `ask` object; a malformed one makes the block unusable (the agent then waits in vain, and says so). */
export function toAsk(value: unknown): ToolAsk | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const a = value as Record<string, unknown>;
  const id = typeof a.id === 'number' && Number.isSafeInteger(a.id) ? String(a.id) : a.id;
  if (typeof id !== 'string' || id === '' || id.length > MAX_ASK_FIELD) return 'id must be a short string';
  if (typeof a.tool !== 'string' || a.tool === '' || a.tool.length > MAX_ASK_FIELD) {
    return 'tool must be a short string';
  }
  const summary = typeof a.summary === 'string' ? a.summary.slice(0, 2000) : null;
  return { id, tool: a.tool, input: a.input ?? null, summary };
}

/** Checks a `tool_result` object; what is malformed in its optional fields is read as absent. */
export function toToolReport(value: unknown): ToolReport | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const r = value as Record<string, unknown>;
  const id = typeof r.id === 'number' && Number.isSafeInteger(r.id) ? String(r.id) : r.id;
  if (typeof id !== 'string' || id === '' || id.length > MAX_ASK_FIELD) return 'id must be a short string';
  const tool = typeof r.tool === 'string' && r.tool !== '' && r.tool.length <= MAX_ASK_FIELD ? r.tool : null;
  const bytes = typeof r.bytes === 'number' && Number.isSafeInteger(r.bytes) && r.bytes >= 0 ? r.bytes : null;
  const sha256 = typeof r.sha256 === 'string' && /^[0-9a-f]{64}$/.test(r.sha256) ? r.sha256 : null;
  const error = typeof r.error === 'string' && r.error !== '' ? r.error.slice(0, 2000) : null;
  return { id, tool, input: r.input ?? null, bytes, sha256, error };
}

/**
 * A block's `memory` question (docs/MEMORY.md): `recall` the facts that share words with `query`, or
 * `search_history` of the chats the session serves. Answers no turn; gated writes a `memory` line.
 */
export interface MemoryQuery {
  id: string;
  op: 'recall' | 'search_history';
  query: string;
  /** Most results wanted (1 to 50; default 10). */
  limit: number;
}

/** Checks a `memory` object; a malformed one makes the block unusable. */
export function toMemoryQuery(value: unknown): MemoryQuery | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const q = value as Record<string, unknown>;
  const id = typeof q.id === 'number' && Number.isSafeInteger(q.id) ? String(q.id) : q.id;
  if (typeof id !== 'string' || id === '' || id.length > MAX_ASK_FIELD) return 'id must be a short string';
  if (q.op !== 'recall' && q.op !== 'search_history') return 'op must be "recall" or "search_history"';
  if (typeof q.query !== 'string' || q.query.length > 4096)
    return 'query must be a string of at most 4096 characters';
  const limit =
    typeof q.limit === 'number' && Number.isSafeInteger(q.limit) ? Math.min(Math.max(q.limit, 1), 50) : 10;
  return { id, op: q.op, query: q.query, limit };
}
