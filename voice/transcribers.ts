import { basename, join } from 'node:path';
import { mkdtemp, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { runProgram, toWav16k } from './audio.js';

/**
 * The transcribers (docs/VOICE.md): an OpenAI-compatible `/v1/audio/transcriptions` endpoint, an operator's
 * command, or the local default on Debian's pocketsphinx. Each takes an audio file on disk and returns the
 * words, or throws a TranscribeError that says whether trying again can help.
 */

/** Why a transcription failed, and whether another attempt can help (a 401 cannot; a 503 may). */
export class TranscribeError extends Error {
  override readonly name = 'TranscribeError';
  constructor(
    message: string,
    readonly retry: boolean,
    /** The wait the service asked for (a 429's Retry-After), in ms. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** What a transcriber is told besides the file. */
export interface TranscribeRequest {
  /** The audio file (any format the transcriber reads; ffmpeg converts for pocketsphinx). */
  file: string;
  mime: string | null;
  /** The group's language (ISO 639-1 such as `en`, or the transcriber's own name for it); undefined: its default. */
  language: string | undefined;
  timeoutMs: number;
}

/** One way of turning speech into text. */
export interface Transcriber {
  /** What the transcriptions row records as its transcriber (never a key or a URL's credentials). */
  readonly name: string;
  transcribe(req: TranscribeRequest): Promise<string>;
}

/** The settings of an OpenAI-compatible endpoint. */
export interface EndpointSettings {
  /** GATED_TRANSCRIBE_URL: the base (`…/v1`) or the whole `…/v1/audio/transcriptions`. */
  url: string;
  /** GATED_TRANSCRIBE_KEY: sent as a bearer token, never logged. */
  key: string | undefined;
  /** GATED_TRANSCRIBE_MODEL (default `whisper-1`). */
  model: string;
  /** GATED_TRANSCRIBE_FORMAT: the `response_format` asked for, `json` (default) or `text`. */
  format: 'json' | 'text';
  fetch?: typeof fetch;
}

/** The endpoint's full URL: a base gets `/audio/transcriptions` (after `/v1` when it has no version). */
export function transcriptionsUrl(url: string): string {
  const u = url.replace(/\/+$/, '');
  if (/\/audio\/transcriptions$/.test(u)) return u;
  return /\/v\d+$/.test(u) ? `${u}/audio/transcriptions` : `${u}/v1/audio/transcriptions`;
}

/**
 * An OpenAI-compatible transcription endpoint (hosted Whisper, whisper.cpp's server, faster-whisper servers,
 * …): a multipart upload of `file`, `model`, `response_format` and `language`; the answer is the text
 * itself (`text`) or `{"text": …}` (`json`). 408, 429 and 5xx are worth another attempt; other errors are
 * not. The error the service gives is kept (bounded), its key never.
 */
export function endpointTranscriber(s: EndpointSettings): Transcriber {
  const target = transcriptionsUrl(s.url);
  const doFetch = s.fetch ?? fetch;
  return {
    name: `endpoint ${new URL(target).host}`,
    async transcribe(req) {
      const form = new FormData();
      const data = await readFile(req.file);
      form.append(
        'file',
        new Blob([data], { type: req.mime ?? 'application/octet-stream' }),
        basename(req.file),
      );
      form.append('model', s.model);
      form.append('response_format', s.format);
      if (req.language) form.append('language', req.language);
      let res: Response;
      try {
        res = await doFetch(target, {
          method: 'POST',
          body: form,
          headers: s.key ? { authorization: `Bearer ${s.key}` } : {},
          signal: AbortSignal.timeout(req.timeoutMs),
        });
      } catch (err) {
        const why =
          (err as Error).name === 'TimeoutError'
            ? `no answer in ${req.timeoutMs} ms`
            : (err as Error).message;
        throw new TranscribeError(`transcription endpoint unreachable: ${why}`, true);
      }
      const body = await res.text();
      if (!res.ok) throw endpointError(res, body);
      return s.format === 'text' ? body : jsonText(body);
    },
  };
}

/** The error of a non-2xx answer: the service's own message when it gave one (OpenAI's `{"error":{…}}`). */
function endpointError(res: Response, body: string): TranscribeError {
  let said = body.trim();
  try {
    const doc = JSON.parse(body) as { error?: { message?: unknown } | string };
    const m = typeof doc.error === 'string' ? doc.error : doc.error?.message;
    if (typeof m === 'string') said = m;
  } catch {
    // Not JSON: the text as it is.
  }
  const retry = res.status === 408 || res.status === 429 || res.status >= 500;
  const after = Number(res.headers.get('retry-after'));
  const message = `transcription endpoint answered ${res.status}${said ? `: ${said.slice(0, 300)}` : ''}`;
  return new TranscribeError(message, retry, Number.isFinite(after) && after > 0 ? after * 1000 : undefined);
}

function jsonText(body: string): string {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    throw new TranscribeError('transcription endpoint answered with JSON it cannot parse', true);
  }
  const text = (doc as { text?: unknown } | null)?.text;
  if (typeof text !== 'string')
    throw new TranscribeError('transcription endpoint answered without "text"', false);
  return text;
}

/**
 * An operator's command (GATED_TRANSCRIBE_CMD, for example whisper.cpp's CLI): run by `sh -c` with the
 * audio file's path as its last argument and GATED_TRANSCRIBE_LANGUAGE set when the group names one; its
 * stdout is the transcript. It sees none of gated's environment beyond PATH, HOME and the locale.
 */
export function commandTranscriber(command: string): Transcriber {
  return {
    name: `command ${command.trim().split(/\s+/)[0] ?? ''}`.slice(0, 100),
    async transcribe(req) {
      try {
        return await runProgram('sh', ['-c', `${command} "$@"`, 'sh', req.file], {
          timeoutMs: req.timeoutMs,
          env: req.language ? { GATED_TRANSCRIBE_LANGUAGE: req.language } : {},
        });
      } catch (err) {
        throw new TranscribeError((err as Error).message, true);
      }
    },
  };
}

/** Where Debian's pocketsphinx-en-us (and any other pocketsphinx model package) puts its models. */
const MODELS = '/usr/share/pocketsphinx/model';

/**
 * The local default (GATED_TRANSCRIBE_CMD=pocketsphinx): ffmpeg makes the audio 16 kHz mono WAV and Debian's
 * `pocketsphinx_continuous` with its US English model writes the words. A group's language picks another
 * model when one is installed under /usr/share/pocketsphinx/model; else US English. Quick and offline, and
 * far less accurate than Whisper: clear speech of common words comes through.
 */
export function pocketsphinxTranscriber(
  tmpDir: () => Promise<string>,
  /** Where the model packages are (tests give their own). */
  modelsDir = MODELS,
): Transcriber {
  return {
    name: 'pocketsphinx',
    async transcribe(req) {
      const dir = await tmpDir();
      const wav = join(dir, 'speech.wav');
      try {
        await toWav16k(req.file, wav, req.timeoutMs);
        const model = modelOf(modelsDir, req.language);
        const args = ['-infile', wav, '-logfn', '/dev/null'];
        if (model) args.push('-hmm', model.hmm, '-lm', model.lm, '-dict', model.dict);
        const out = await runProgram('pocketsphinx_continuous', args, { timeoutMs: req.timeoutMs });
        // One line per utterance it heard.
        return out
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)
          .join(' ');
      } catch (err) {
        throw new TranscribeError((err as Error).message, true);
      }
    },
  };
}

/** The model files of a language other than US English, when its package is installed (null: the default). */
function modelOf(
  modelsDir: string,
  language: string | undefined,
): { hmm: string; lm: string; dict: string } | null {
  if (!language) return null;
  const lang = language.toLowerCase();
  if (!/^[a-z]{2}(-[a-z]{2})?$/.test(lang) || lang === 'en' || lang === 'en-us') return null;
  const dir = join(modelsDir, lang);
  const hmm = join(dir, lang);
  const lm = join(dir, `${lang}.lm.bin`);
  const dict = join(dir, 'cmudict-' + lang + '.dict');
  return existsSync(hmm) && existsSync(lm) && existsSync(dict) ? { hmm, lm, dict } : null;
}

/** The transcriber the settings name: the endpoint, `pocketsphinx` (the built-in local default), or a command. */
export function transcriberOf(
  via:
    | { kind: 'endpoint'; url: string; key: string | undefined; model: string; format: 'json' | 'text' }
    | { kind: 'command'; command: string },
  /** A folder of gated's own: pocketsphinx's intermediate files go in a fresh folder under it. */
  spoolDir: string,
): Transcriber {
  if (via.kind === 'endpoint') return endpointTranscriber(via);
  if (via.command === 'pocketsphinx') return pocketsphinxTranscriber(() => mkdtemp(join(spoolDir, 'tmp-')));
  return commandTranscriber(via.command);
}
