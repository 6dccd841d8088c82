/**
 * A small OpenAI-compatible transcription server on 127.0.0.1, for tests: `POST /v1/audio/transcriptions`
 * with a multipart body (`file`, `model`, `response_format`, `language`) and a bearer key, answered as the
 * OpenAI API answers: `{"text": …}` for `json`, the words alone for `text`, and
 * `{"error": {"message", "type", "code"}}` with its status for errors. By default it transcribes for real,
 * with Debian's pocketsphinx (voice/transcribers.ts), so a test sends speech and gets words; a test can make
 * the next answers fail (401, 429 with Retry-After, 500) and reads every request it took.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pocketsphinxTranscriber } from '../../voice/transcribers.js';
import { listenLoopback, type Loopback } from './loopback.js';

/** One request the server took, as it read it. */
export interface TranscriptionRequest {
  authorization: string | undefined;
  contentType: string;
  model: string | null;
  responseFormat: string | null;
  language: string | null;
  fileName: string | null;
  fileType: string | null;
  fileBytes: number;
}

/** A failure the next requests get. */
export interface TranscriptionFault {
  status: number;
  message: string;
  retryAfterS?: number;
}

/** The running server. */
export class TranscriptionsApi {
  readonly requests: TranscriptionRequest[] = [];
  private readonly faults: TranscriptionFault[] = [];
  private loopback!: Loopback;

  private constructor(readonly key: string) {}

  /** Starts the server; requests must carry `Authorization: Bearer <key>`. */
  static async start(key = 'sk-test-transcribe-key'): Promise<TranscriptionsApi> {
    const api = new TranscriptionsApi(key);
    const server = createServer((req, res) => void api.handle(req, res));
    api.loopback = await listenLoopback(server);
    return api;
  }

  /** The base URL a client is given (`…/v1`). */
  get url(): string {
    return `http://127.0.0.1:${this.loopback.port}/v1`;
  }

  /** The next `times` requests answer with `fault`. */
  failNext(fault: TranscriptionFault, times = 1): void {
    for (let i = 0; i < times; i++) this.faults.push(fault);
  }

  close(): Promise<void> {
    return this.loopback.close();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions')
      return error(res, 404, `Invalid URL (${req.method} ${req.url})`, 'invalid_request_error');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const contentType = req.headers['content-type'] ?? '';
    const form = await new Request('http://x/', {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: Buffer.concat(chunks),
    })
      .formData()
      .catch(() => null);
    const file = form?.get('file');
    const seen: TranscriptionRequest = {
      authorization: req.headers.authorization,
      contentType: contentType.split(';')[0]!,
      model: text(form?.get('model')),
      responseFormat: text(form?.get('response_format')),
      language: text(form?.get('language')),
      fileName: file instanceof File ? file.name : null,
      fileType: file instanceof File ? file.type : null,
      fileBytes: file instanceof File ? file.size : 0,
    };
    this.requests.push(seen);
    if (req.headers.authorization !== `Bearer ${this.key}`)
      return error(res, 401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
    const fault = this.faults.shift();
    if (fault) return error(res, fault.status, fault.message, 'server_error', null, fault.retryAfterS);
    if (!form || !(file instanceof File))
      return error(res, 400, "you must provide a 'file'", 'invalid_request_error');
    const words = await transcribe(Buffer.from(await file.arrayBuffer()), file.name);
    if (seen.responseFormat === 'text') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      return void res.end(`${words}\n`);
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ text: words }));
  }
}

function text(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** Real words for the audio: the local pocketsphinx, as a Whisper server would give its own. */
async function transcribe(data: Buffer, name: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'transcriptions-api-'));
  try {
    const file = join(dir, name.replace(/[^A-Za-z0-9._-]/g, '_') || 'audio');
    writeFileSync(file, data);
    return await pocketsphinxTranscriber(async () => dir).transcribe({
      file,
      mime: null,
      language: undefined,
      timeoutMs: 60_000,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function error(
  res: ServerResponse,
  status: number,
  message: string,
  type: string,
  code: string | null = null,
  retryAfterS?: number,
): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    ...(retryAfterS !== undefined ? { 'retry-after': String(retryAfterS) } : {}),
  });
  res.end(JSON.stringify({ error: { message, type, param: null, code } }));
}
