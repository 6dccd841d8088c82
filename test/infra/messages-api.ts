/**
 * A small Anthropic Messages API server on 127.0.0.1 for tests: `POST /v1/messages` answered with a streamed
 * (SSE, with `event:` lines) message, the way the Claude Code CLI expects it. It plays a scripted model: what
 * it answers is decided by the newest user text of the request, so a test steers it through the chat:
 *
 * - `WRITE <path> <word>`: a `tool_use` of the Write tool creating that file (a relative path inside the
 *   working directory the CLI states in its system prompt, an absolute one as it is) with `<word>` as
 *   content; once the tool result comes back, a text saying it was written (quoting the result);
 * - `BASH <command>`: a `tool_use` of the Bash tool running that command (the rest of the message); once the
 *   result comes back, `Tool Bash said: <output>`;
 * - `TOOL <name> <json>`: a `tool_use` of the offered tool called `<name>` (or `mcp__<server>__<name>`) with
 *   that JSON as input; once the result comes back, a text quoting it (`Tool <name> said: …`). A tool the
 *   request does not offer gets the text `no tool <name>`;
 * - `ATTACH <path> <word>`: a text, then the Write tool creating that file; once written, a text, then the
 *   offered `attach` tool (gated's own, `mcp__gated__attach`) naming the path; once attached, a text. Three
 *   texts, two of them before a tool call, for the agent to keep in its answer;
 * - `SLOW <seconds>`: text streamed in small deltas for that long (numbered lines, so a test can check that
 *   nothing was lost); while a test holds the server (`hold`), it stops after the line it is at;
 * - `THEN SLOW <seconds>` after a `WRITE` or `TOOL`: once the tool's result comes back, the answer is streamed
 *   as `SLOW` does instead of the usual text (a turn a test can cut after its tool ran);
 * - `MARKDOWN`: MARKDOWN_SAMPLE (a heading, bold, a table, a code fence) streamed 4 characters a delta, so
 *   drafts cut it anywhere: inside `**`, inside the fence, in the middle of the table;
 * - `OVERLOAD`: HTTP 529 `overloaded_error`;
 * - `STALL`: the stream starts (`message_start`) and then says nothing more until the client goes away (an
 *   API that hangs mid-answer);
 * - `TOOLONG <word>`: the first request whose newest user words carry `TOOLONG <word>` is refused with HTTP
 *   400 "prompt is too long" (as the API refuses a context over the model's window); later ones answer
 *   `echo: …` as usual, so an agent that compacts its session and retries gets its answer;
 * - `HUGE`: every request whose user words carry `HUGE` anywhere in the conversation is refused with HTTP
 *   400 "prompt is too long", the requests that would compact it included (a session that cannot be
 *   compacted any more);
 * - `CALLS [[<name>, <json>], …]`: those tool calls one after another (each once the previous result came
 *   back), then a text `Calls done.` followed by every gated receipt the conversation showed since the
 *   message, in results or in the `system` entries hooks add (a model citing its receipts);
 * - `SAY <markdown>`: exactly that text;
 * - anything else: `echo: <text>`.
 *
 * A message the CLI folds into a turn in progress (steered: a `system` entry after a tool's result, holding
 * gated's `<message>` elements) is answered too: the text answer then ends with `echo: <its words>`; a
 * steered `TOOL <name> <json>` is called first, before the turn's own `THEN SLOW` or text.
 *
 * Every request is recorded (body and headers). Requests that are not the conversation's own (the CLI's side
 * calls, e.g. a title) get a short text and are not counted as turns.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenLoopback, type Loopback } from './loopback.js';

/** One content block of a message, as far as the scripted model reads it. */
interface Block {
  type: string;
  text?: string;
  content?: unknown;
  tool_use_id?: string;
  name?: string;
  id?: string;
}

/** One entry of `messages` in a request. */
export interface ApiMessage {
  role: string;
  content: string | Block[];
}

/** A recorded request. */
export interface RecordedRequest {
  body: {
    model?: string;
    system?: unknown;
    messages: ApiMessage[];
    tools?: Array<{ name: string }>;
    stream?: boolean;
  };
  headers: IncomingMessage['headers'];
  /** HTTP status the server answered with. */
  status: number;
  /** Epoch ms the request arrived. */
  atMs: number;
  /** Epoch ms the client went away before a streamed answer was complete (an interrupt), else null. */
  cutMs: number | null;
}

/** What the scripted model does next. */
type Plan =
  | { kind: 'text'; text: string }
  | { kind: 'slow'; seconds: number }
  | { kind: 'chunks'; text: string; size: number }
  | { kind: 'tool'; name: string; input: Record<string, unknown>; preface?: string }
  | { kind: 'overload' }
  | { kind: 'too-long' }
  | { kind: 'stall' };

const DELTA_MS = 50;

/** What `MARKDOWN` streams: every construct a draft may cut in half. */
export const MARKDOWN_SAMPLE = [
  '## Answer #1',
  '',
  'Some **bold words** and `inline code`, then a table:',
  '',
  '| name | value |',
  '|------|------:|',
  '| alpha | 1 |',
  '| beta | 22 |',
  '',
  '```js',
  'const x = 1 < 2 && 3 > 2;',
  '```',
  '',
  'That is **all**.',
].join('\n');

/** The numbered lines `SLOW n` streams, for the test to compare with what reached the chat. */
export function slowText(seconds: number): string {
  const lines: string[] = [];
  const n = Math.max(1, Math.round((seconds * 1000) / DELTA_MS));
  for (let i = 1; i <= n; i++) lines.push(`line ${String(i).padStart(4, '0')} of the long answer`);
  return lines.join('\n');
}

function unescapeXml(s: string): string {
  return s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
}

function textOf(content: string | Block[]): string {
  if (typeof content === 'string') return content;
  return content
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text!)
    .join('\n');
}

/** The user's own words in the newest user message: the contents of gated's `<message>` elements. */
export function userWords(content: string | Block[]): string {
  const text = textOf(content);
  const inner = [...text.matchAll(/<message [^>]*>([\s\S]*?)<\/message>/g)].map((m) => m[1]!);
  return unescapeXml(inner.length > 0 ? inner.join('\n') : text).trim();
}

/**
 * The words of messages folded into the turn after the newest assistant message: the CLI adds a message
 * sent mid-turn as a `system` entry beside the next tool result.
 */
function steeredWords(body: RecordedRequest['body']): string {
  const lastAssistant = body.messages.map((m) => m.role).lastIndexOf('assistant');
  return body.messages
    .slice(lastAssistant + 1)
    .filter((m) => m.role === 'system' && /<message [^>]*>/.test(textOf(m.content)))
    .map((m) => userWords(m.content))
    .join('\n');
}

/**
 * A user message holding a tool call's error result and a new prompt (gated's `<message>` elements): the
 * CLI's answer for a call an interrupt cut, sent with the prompt that came next, which is what is answered.
 */
function afterCut(m: ApiMessage): boolean {
  if (!Array.isArray(m.content)) return false;
  const failed = m.content.some(
    (b) => b.type === 'tool_result' && (b as { is_error?: boolean }).is_error === true,
  );
  return failed && m.content.some((b) => b.type === 'text' && /<message [^>]*>/.test(b.text ?? ''));
}

/** The plan of a `TOOL <name> <json>` in `words`, or null when they hold none. */
function toolCall(body: RecordedRequest['body'], words: string): Plan | null {
  const call = /\bTOOL (\S+) (\{[\s\S]*\})/.exec(words);
  if (!call) return null;
  const wanted = call[1]!;
  const offered = (body.tools ?? []).find((t) => t.name === wanted || t.name.endsWith(`__${wanted}`));
  if (!offered) return { kind: 'text', text: `no tool ${wanted}` };
  try {
    return { kind: 'tool', name: offered.name, input: JSON.parse(call[2]!) as Record<string, unknown> };
  } catch {
    return { kind: 'text', text: `bad JSON for ${wanted}` };
  }
}

function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  if (Array.isArray(system)) return system.map((b: Block) => b.text ?? '').join('\n');
  return '';
}

function workingDir(req: RecordedRequest['body']): string {
  const all = systemText(req.system) + '\n' + req.messages.map((m) => textOf(m.content)).join('\n');
  const m = /working directory: *(\/\S*)/i.exec(all);
  return m ? m[1]! : '/workspace';
}

/** A gated receipt as the agent hands it to the model (store/receipts.ts). */
const RECEIPT = /gated-receipt:v1:\d+\.\d+:[0-9a-f]{64}/g;

/**
 * The next step of a `CALLS` script: the call after the results that came back since the message that
 * asked, or, after the last, the text citing every receipt seen since.
 */
function nextCall(body: RecordedRequest['body'], script: string): Plan {
  let steps: Array<[string, Record<string, unknown>]>;
  try {
    steps = JSON.parse(script) as typeof steps;
  } catch {
    return { kind: 'text', text: 'bad CALLS script' };
  }
  const asked = body.messages.findLastIndex((m) => m.role === 'user' && /\bCALLS \[/.test(textOf(m.content)));
  // The CLI hands a hook's context to the model as a `system` entry after the tool's result.
  const after = body.messages.slice(asked + 1);
  const since = after.filter((m) => m.role === 'user');
  const results = since
    .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
    .filter((b) => b.type === 'tool_result');
  const step = steps[results.length];
  if (step) {
    const offered = (body.tools ?? []).find((t) => t.name === step[0] || t.name.endsWith(`__${step[0]}`));
    return { kind: 'tool', name: offered?.name ?? step[0], input: step[1] };
  }
  const seen = JSON.stringify(after).match(RECEIPT) ?? [];
  return { kind: 'text', text: ['Calls done.', ...new Set(seen)].join('\n') };
}

/** The running server. */
export class MessagesApiServer {
  /** Every request, in order. */
  readonly requests: RecordedRequest[] = [];
  private loopback!: Loopback;
  private nextId = 1;
  /** The TOOLONG texts already refused once. */
  private readonly refusedTooLong = new Set<string>();
  /** Set by hold(): `SLOW` streams wait on it after the line they are at. */
  private held: Promise<void> | null = null;

  private constructor() {}

  /** Starts a server on a free loopback port. */
  static async start(): Promise<MessagesApiServer> {
    const api = new MessagesApiServer();
    const server = createServer((req, res) => void api.handle(req, res));
    api.loopback = await listenLoopback(server);
    return api;
  }

  /** For ANTHROPIC_BASE_URL. */
  get url(): string {
    return `http://127.0.0.1:${this.loopback.port}`;
  }

  /** Requests of the conversation itself (those that offer tools), not the CLI's side calls. */
  get turns(): RecordedRequest[] {
    return this.requests.filter((r) => (r.body.tools?.length ?? 0) > 0);
  }

  /** Every user text the conversation requests carried, for "the model saw the earlier turns". */
  seenUserWords(req: RecordedRequest): string[] {
    return req.body.messages.filter((m) => m.role === 'user').map((m) => userWords(m.content));
  }

  /**
   * Holds every `SLOW` stream at its next line until the returned function is called, so a test can
   * look at a turn in flight (its container, its process) for as long as that takes on a loaded machine,
   * instead of hoping the stream outlasts the look.
   */
  hold(): () => void {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    this.held = held;
    return () => {
      if (this.held === held) this.held = null;
      release();
    };
  }

  close(): Promise<void> {
    return this.loopback.close();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST' || path !== '/v1/messages') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'not here' } }));
      return;
    }
    let body: RecordedRequest['body'];
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body'];
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'bad JSON' } }),
      );
      return;
    }
    const rec: RecordedRequest = { body, headers: req.headers, status: 200, atMs: Date.now(), cutMs: null };
    this.requests.push(rec);
    const plan = this.plan(body);
    const steered = steeredWords(body);
    if (plan.kind === 'text' && steered !== '') plan.text += `\n\necho: ${steered}`;
    if (plan.kind === 'overload') {
      rec.status = 529;
      res.writeHead(529, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
      return;
    }
    if (plan.kind === 'too-long') {
      rec.status = 400;
      res.writeHead(400, { 'content-type': 'application/json' });
      const message = 'prompt is too long: 212345 tokens > 200000 maximum';
      res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message } }));
      return;
    }
    res.once('close', () => {
      if (!res.writableEnded) rec.cutMs = Date.now();
    });
    await this.stream(res, body.model ?? 'claude-test', plan);
  }

  /** The words of the newest user message that is not a tool result: what the turn was asked. */
  private promptWords(body: RecordedRequest['body']): string {
    const asked = body.messages
      .filter((m) => m.role === 'user')
      .filter((m) => !Array.isArray(m.content) || !m.content.some((b) => b.type === 'tool_result'))
      .at(-1);
    return asked ? userWords(asked.content) : '';
  }

  private plan(body: RecordedRequest['body']): Plan {
    const conversation = (body.tools?.length ?? 0) > 0;
    const last = body.messages.filter((m) => m.role === 'user').at(-1);
    if (body.messages.some((m) => m.role === 'user' && /\bHUGE\b/.test(textOf(m.content))))
      return { kind: 'too-long' };
    if (!conversation || !last) return { kind: 'text', text: 'Chat' };
    const calls = /\bCALLS (\[[\s\S]*\])/.exec(this.promptWords(body));
    if (calls) return nextCall(body, calls[1]!);
    if (
      Array.isArray(last.content) &&
      last.content.some((b) => b.type === 'tool_result') &&
      !afterCut(last)
    ) {
      const r = last.content.find((b) => b.type === 'tool_result')!;
      const said = typeof r.content === 'string' ? r.content : textOf(r.content as Block[]);
      const use = body.messages
        .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
        .find((b) => b.type === 'tool_use' && b.id === r.tool_use_id);
      // A TOOL call steered in beside this result is made first (a turn doing more after the steer).
      const steeredCall = toolCall(body, steeredWords(body));
      if (steeredCall) return steeredCall;
      const then = /\bTHEN SLOW (\d+)/.exec(this.promptWords(body));
      if (then) return { kind: 'slow', seconds: Number(then[1]) };
      const attach = /\bATTACH (\S+) (\S+)/.exec(this.promptWords(body));
      if (attach && use?.name === 'Write') {
        const name = (body.tools ?? []).find((t) => t.name.endsWith('__attach'))?.name ?? 'attach';
        return { kind: 'tool', name, input: { path: attach[1]! }, preface: 'Written; now attaching it.' };
      }
      if (attach && use?.name?.endsWith('attach')) return { kind: 'text', text: `Here is ${attach[1]}.` };
      if (use?.name === 'Write') return { kind: 'text', text: `The file is written (${said.slice(0, 80)}).` };
      return { kind: 'text', text: `Tool ${use?.name ?? '?'} said: ${said}` };
    }
    const words = userWords(last.content);
    const write = /\bWRITE (\S+) (\S+)/.exec(words);
    if (write) {
      const path = write[1]!.startsWith('/') ? write[1]! : `${workingDir(body)}/${write[1]}`;
      const input = { file_path: path, content: write[2]! };
      return { kind: 'tool', name: 'Write', input };
    }
    const attach = /\bATTACH (\S+) (\S+)/.exec(words);
    if (attach) {
      const path = `${workingDir(body)}/${attach[1]}`;
      const input = { file_path: path, content: attach[2]! };
      return { kind: 'tool', name: 'Write', input, preface: `I will write ${attach[1]} first.` };
    }
    const bash = /\bBASH ([\s\S]+)$/.exec(words);
    if (bash) return { kind: 'tool', name: 'Bash', input: { command: bash[1]!.trim() } };
    const call = toolCall(body, words);
    if (call) return call;
    if (/\bMARKDOWN\b/.test(words)) return { kind: 'chunks', text: MARKDOWN_SAMPLE, size: 4 };
    const slow = /\bSLOW (\d+)/.exec(words);
    if (slow) return { kind: 'slow', seconds: Number(slow[1]) };
    if (/\bOVERLOAD\b/.test(words)) return { kind: 'overload' };
    if (/\bSTALL\b/.test(words)) return { kind: 'stall' };
    const tooLong = /\bTOOLONG\b\s*\S*/.exec(words);
    if (tooLong && !this.refusedTooLong.has(tooLong[0])) {
      this.refusedTooLong.add(tooLong[0]);
      return { kind: 'too-long' };
    }
    const say = /\bSAY ([\s\S]*)$/.exec(words);
    if (say) return { kind: 'text', text: say[1]! };
    return { kind: 'text', text: `echo: ${words}` };
  }

  private async stream(
    res: ServerResponse,
    model: string,
    plan: Exclude<Plan, { kind: 'overload' } | { kind: 'too-long' }>,
  ): Promise<void> {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    const send = (event: string, data: Record<string, unknown>) =>
      res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
    const id = `msg_test_${this.nextId++}`;
    send('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 25, output_tokens: 1 },
      },
    });
    if (plan.kind === 'stall') {
      // Nothing more: the client gives up (or is stopped) and closes the connection.
      await new Promise<void>((r) => res.once('close', () => r()));
      return;
    }
    let outputTokens = 0;
    let stopReason = 'end_turn';
    if (plan.kind === 'tool') {
      stopReason = 'tool_use';
      let index = 0;
      if (plan.preface) {
        send('content_block_start', { index, content_block: { type: 'text', text: '' } });
        send('content_block_delta', { index, delta: { type: 'text_delta', text: plan.preface } });
        send('content_block_stop', { index });
        index += 1;
      }
      send('content_block_start', {
        index,
        content_block: { type: 'tool_use', id: `toolu_test_${this.nextId}`, name: plan.name, input: {} },
      });
      const input = JSON.stringify(plan.input);
      send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: input } });
      send('content_block_stop', { index });
      outputTokens = 30;
    } else {
      send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      if (plan.kind === 'chunks') {
        for (let i = 0; i < plan.text.length; i += plan.size) {
          if (res.destroyed) return;
          const text = plan.text.slice(i, i + plan.size);
          send('content_block_delta', { index: 0, delta: { type: 'text_delta', text } });
          outputTokens += 1;
          await new Promise((r) => setTimeout(r, DELTA_MS));
        }
      } else if (plan.kind === 'slow') {
        for (const line of slowText(plan.seconds).split('\n')) {
          if (res.destroyed) return;
          send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: line + '\n' } });
          outputTokens += 8;
          if (this.held) await this.held;
          await new Promise((r) => setTimeout(r, DELTA_MS));
        }
      } else {
        // Two deltas: the client must join them.
        const text = plan.text;
        const cut = Math.ceil(text.length / 2);
        for (const part of [text.slice(0, cut), text.slice(cut)]) {
          if (part) send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: part } });
        }
        outputTokens = Math.max(1, Math.ceil(text.length / 4));
      }
      send('content_block_stop', { index: 0 });
    }
    send('message_delta', {
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: outputTokens },
    });
    send('message_stop', {});
    res.end();
  }
}
