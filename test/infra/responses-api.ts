/**
 * A small OpenAI Responses API server on 127.0.0.1 for tests: `POST /v1/responses` answered with a streamed
 * (SSE, `event:` lines) response, as the Codex CLI reads it (`response.created`, `response.output_item.added`,
 * `response.output_text.delta`, `response.output_item.done`, `response.completed` with usage). Websocket
 * upgrades are refused (the Codex agent turns them off; a request for one is counted, so a test can say so).
 * It plays a scripted model, steered by the newest user text:
 *
 * - `TOOL <name> <json>`: a `function_call` of the offered tool whose name is `<name>` or ends with it; a
 *   tool inside a `namespace` entry (how the CLI offers MCP tools: namespace `mcp__<server>`, tool `<tool>`)
 *   is named `<namespace>__<tool>` here and called with its `namespace`; once its output comes back, a text
 *   `Tool <name> said: <output>` quoting it (several output parts joined);
 * - `SLOW <seconds>`: text streamed in small deltas for that long;
 * - `THEN SLOW <seconds>` after a `TOOL`: once the tool's output comes back, the answer is streamed as `SLOW`
 *   does instead of quoting it (a turn a test can cut after its tool ran);
 * - anything else: `codex echo: <words>`.
 *
 * Every request is recorded (body, headers).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenLoopback, type Loopback } from './loopback.js';

/** One input item of a request, as far as the scripted model reads it. */
interface InputItem {
  type?: string;
  role?: string;
  content?: string | Array<{ type: string; text?: string }>;
  call_id?: string;
  name?: string;
  namespace?: string;
  output?: unknown;
}

/** An offered tool: a function, or a namespace of functions. */
interface ToolEntry {
  type: string;
  name?: string;
  tools?: ToolEntry[];
}

/** A recorded request. */
export interface ResponsesRequest {
  body: {
    model?: string;
    instructions?: string;
    input: InputItem[];
    tools?: ToolEntry[];
    stream?: boolean;
  };
  headers: IncomingMessage['headers'];
  /** Epoch ms the client went away before a streamed answer was complete (an interrupt), else null. */
  cutMs: number | null;
}

type Plan =
  | { kind: 'text'; text: string; deltaMs: number }
  | { kind: 'call'; name: string; namespace?: string; args: string };

const DELTA_MS = 50;

/** `SLOW <seconds>`: numbered lines streamed in small deltas for that long. */
function slowPlan(seconds: number): Plan {
  const n = Math.max(1, Math.round((seconds * 1000) / DELTA_MS));
  const text = Array.from({ length: n }, (_, i) => `codex line ${i + 1}\n`).join('');
  return { kind: 'text', text, deltaMs: DELTA_MS };
}

function textOf(item: InputItem): string {
  if (typeof item.content === 'string') return item.content;
  return (item.content ?? []).map((c) => c.text ?? '').join('\n');
}

/** What a tool's output said, as text: a string, or the text of its parts. */
function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output))
    return output
      .map((p: { text?: string }) => (typeof p?.text === 'string' ? p.text : JSON.stringify(p)))
      .join('\n');
  return JSON.stringify(output);
}

/** The full names of the offered tools (`<namespace>__<tool>` inside a namespace) and how to call each. */
export function offeredTools(
  tools: ToolEntry[] | undefined,
): Array<{ full: string; name: string; namespace?: string }> {
  const out: Array<{ full: string; name: string; namespace?: string }> = [];
  for (const t of tools ?? []) {
    if (t.type === 'namespace' && t.name)
      for (const sub of t.tools ?? [])
        if (sub.name) out.push({ full: `${t.name}__${sub.name}`, name: sub.name, namespace: t.name });
    if (t.type !== 'namespace' && t.name) out.push({ full: t.name, name: t.name });
  }
  return out;
}

/** The words of gated's `<message>` elements in a user text (or the text itself). */
export function userWordsOf(text: string): string {
  const inner = [...text.matchAll(/<message [^>]*>([\s\S]*?)<\/message>/g)].map((m) => m[1]!);
  return (inner.length > 0 ? inner.join('\n') : text)
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&')
    .trim();
}

/** The running server. */
export class ResponsesApiServer {
  readonly requests: ResponsesRequest[] = [];
  /** Websocket upgrade attempts (refused). */
  websocketAttempts = 0;
  private loopback!: Loopback;
  private next = 1;

  private constructor() {}

  /** Starts a server on a free loopback port. */
  static async start(): Promise<ResponsesApiServer> {
    const api = new ResponsesApiServer();
    const server = createServer((req, res) => void api.handle(req, res));
    server.on('upgrade', (_req, socket) => {
      api.websocketAttempts += 1;
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
    });
    api.loopback = await listenLoopback(server);
    return api;
  }

  /** The base URL the Codex CLI is pointed at (`…/v1`). */
  get url(): string {
    return `http://127.0.0.1:${this.loopback.port}/v1`;
  }

  /** The newest user words of a request. */
  userWords(req: ResponsesRequest): string {
    const users = req.body.input.filter((i) => i.role === 'user');
    return userWordsOf(users.length > 0 ? textOf(users.at(-1)!) : '');
  }

  /** The newest request whose newest user words contain `words`. */
  requestFor(words: string): ResponsesRequest | undefined {
    return [...this.requests].reverse().find((r) => this.userWords(r).includes(words));
  }

  close(): Promise<void> {
    return this.loopback.close();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST' || path !== '/v1/responses') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not here', type: 'invalid_request_error' } }));
      return;
    }
    let body: ResponsesRequest['body'];
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ResponsesRequest['body'];
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'bad JSON', type: 'invalid_request_error' } }));
      return;
    }
    const rec: ResponsesRequest = { body, headers: req.headers, cutMs: null };
    this.requests.push(rec);
    res.once('close', () => {
      if (!res.writableEnded) rec.cutMs = Date.now();
    });
    await this.stream(res, body.model ?? 'gpt-test', this.plan(body));
  }

  private plan(body: ResponsesRequest['body']): Plan {
    const last = body.input.at(-1);
    if (last?.type === 'function_call_output') {
      const call = body.input.find((i) => i.type === 'function_call' && i.call_id === last.call_id);
      const name = call?.namespace ? `${call.namespace}__${call.name}` : (call?.name ?? '?');
      const users = body.input.filter((i) => i.role === 'user');
      const then = /\bTHEN SLOW (\d+)/.exec(userWordsOf(users.length > 0 ? textOf(users.at(-1)!) : ''));
      if (then) return slowPlan(Number(then[1]));
      return { kind: 'text', text: `Tool ${name} said: ${outputText(last.output)}`, deltaMs: 0 };
    }
    const users = body.input.filter((i) => i.role === 'user');
    const words = userWordsOf(users.length > 0 ? textOf(users.at(-1)!) : '');
    const tool = /\bTOOL (\S+) (\{[\s\S]*\})/.exec(words);
    if (tool) {
      const offered = offeredTools(body.tools).find((t) => t.full === tool[1] || t.full.endsWith(tool[1]!));
      if (!offered) return { kind: 'text', text: `no tool ${tool[1]}`, deltaMs: 0 };
      return { kind: 'call', name: offered.name, namespace: offered.namespace, args: tool[2]! };
    }
    const slow = /\bSLOW (\d+)/.exec(words);
    if (slow) return slowPlan(Number(slow[1]));
    return { kind: 'text', text: `codex echo: ${words}`, deltaMs: 0 };
  }

  private async stream(res: ServerResponse, model: string, plan: Plan): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (type: string, data: Record<string, unknown>) =>
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    const id = `resp_test_${this.next++}`;
    send('response.created', {
      response: { id, object: 'response', model, status: 'in_progress', output: [] },
    });
    let item: Record<string, unknown>;
    if (plan.kind === 'call') {
      item = {
        type: 'function_call',
        id: `fc_${id}`,
        call_id: `call_${id}`,
        name: plan.name,
        ...(plan.namespace ? { namespace: plan.namespace } : {}),
        arguments: plan.args,
        status: 'completed',
      };
      send('response.output_item.added', { output_index: 0, item: { ...item, arguments: '' } });
      send('response.function_call_arguments.delta', { item_id: item.id, output_index: 0, delta: plan.args });
    } else {
      const msgId = `msg_${id}`;
      send('response.output_item.added', {
        output_index: 0,
        item: { type: 'message', id: msgId, role: 'assistant', status: 'in_progress', content: [] },
      });
      // Several deltas: the client must join them.
      const parts =
        plan.deltaMs > 0 ? plan.text.split(/(?<=\n)/) : [plan.text.slice(0, 5), plan.text.slice(5)];
      for (const delta of parts.filter((p) => p !== '')) {
        if (res.destroyed) return;
        send('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta });
        if (plan.deltaMs > 0) await new Promise((r) => setTimeout(r, plan.deltaMs));
      }
      item = {
        type: 'message',
        id: msgId,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: plan.text, annotations: [] }],
      };
    }
    send('response.output_item.done', { output_index: 0, item });
    const outputTokens = Math.max(1, Math.ceil(JSON.stringify(item).length / 8));
    send('response.completed', {
      response: {
        id,
        object: 'response',
        model,
        status: 'completed',
        output: [item],
        usage: {
          input_tokens: 40,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: outputTokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: 40 + outputTokens,
        },
      },
    });
    res.end();
  }
}
