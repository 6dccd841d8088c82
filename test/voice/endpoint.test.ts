/**
 * The OpenAI-compatible transcriber (voice/transcribers.ts) against a local server that speaks that API
 * (test/infra/transcriptions-api.ts, transcribing for real with pocketsphinx): the multipart upload, the
 * `json` and `text` response formats, and its errors, each with whether another attempt can help.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointTranscriber, TranscribeError, transcriptionsUrl } from '../../voice/transcribers.js';
import { TranscriptionsApi } from '../infra/transcriptions-api.js';
import { KEY_WORDS, voiceNote } from './speech.js';

let api: TranscriptionsApi;
let dir: string;
let file: string;

beforeAll(async () => {
  api = await TranscriptionsApi.start();
  // One voice note for the file (tempDir's folders go after each test).
  dir = mkdtempSync(join(tmpdir(), 'gated-voice-'));
  file = join(dir, 'voice.ogg');
  writeFileSync(file, await voiceNote());
}, 60_000);
afterAll(async () => {
  await api.close();
  rmSync(dir, { recursive: true, force: true });
});

const request = { mime: 'audio/ogg', language: 'en', timeoutMs: 30_000 };
const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err as TranscribeError,
  );

describe('an OpenAI-compatible transcription endpoint', () => {
  it('json: a multipart upload of file, model, response_format and language, the words back', async () => {
    const t = endpointTranscriber({ url: api.url, key: api.key, model: 'whisper-1', format: 'json' });
    const words = await t.transcribe({ file, ...request });
    for (const w of KEY_WORDS) expect(words).toContain(w);
    expect(api.requests.at(-1)).toMatchObject({
      authorization: `Bearer ${api.key}`,
      contentType: 'multipart/form-data',
      model: 'whisper-1',
      responseFormat: 'json',
      language: 'en',
      fileName: 'voice.ogg',
      fileType: 'audio/ogg',
    });
    expect(t.name).toBe(`endpoint ${new URL(api.url).host}`);
  }, 30_000);

  it('text: the words as the body, with the whole endpoint URL given', async () => {
    const t = endpointTranscriber({
      url: `${api.url}/audio/transcriptions`,
      key: api.key,
      model: 'large-v3',
      format: 'text',
    });
    const words = await t.transcribe({ file, ...request, language: undefined });
    expect(words.endsWith('\n')).toBe(true);
    for (const w of KEY_WORDS) expect(words).toContain(w);
    expect(api.requests.at(-1)).toMatchObject({ model: 'large-v3', responseFormat: 'text', language: null });
  }, 30_000);

  it('a refused key is not worth another attempt, and the key is never in the error', async () => {
    const t = endpointTranscriber({ url: api.url, key: 'sk-wrong-key', model: 'whisper-1', format: 'json' });
    const err = await failure(t.transcribe({ file, ...request }));
    expect(err).toBeInstanceOf(TranscribeError);
    expect(err.message).toBe('transcription endpoint answered 401: Incorrect API key provided.');
    expect(err.retry).toBe(false);
    expect(err.message).not.toContain('sk-wrong-key');
  });

  it('429 names its wait, 500 is worth another attempt, an unreachable endpoint too', async () => {
    const t = endpointTranscriber({ url: api.url, key: api.key, model: 'whisper-1', format: 'json' });
    api.failNext({ status: 429, message: 'Rate limit reached', retryAfterS: 3 });
    const limited = await failure(t.transcribe({ file, ...request }));
    expect(limited).toMatchObject({ retry: true, retryAfterMs: 3000 });
    expect(limited.message).toBe('transcription endpoint answered 429: Rate limit reached');
    api.failNext({ status: 500, message: 'The server had an error' });
    expect(await failure(t.transcribe({ file, ...request }))).toMatchObject({ retry: true });
    const gone = endpointTranscriber({ url: 'http://127.0.0.1:9/v1', key: 'k', model: 'm', format: 'json' });
    const unreachable = await failure(gone.transcribe({ file, ...request }));
    expect(unreachable.retry).toBe(true);
    expect(unreachable.message).toMatch(/^transcription endpoint unreachable: /);
  });

  it('a base URL gets /v1/audio/transcriptions; a versioned base or the whole path is kept', () => {
    expect(transcriptionsUrl('http://h:1')).toBe('http://h:1/v1/audio/transcriptions');
    expect(transcriptionsUrl('http://h:1/v1/')).toBe('http://h:1/v1/audio/transcriptions');
    expect(transcriptionsUrl('http://h:1/v1/audio/transcriptions')).toBe(
      'http://h:1/v1/audio/transcriptions',
    );
  });
});
