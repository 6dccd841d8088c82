import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { backoffDelay, type BackoffOptions } from '../core/backoff.js';
import type { TranscribeConfig } from '../core/config-voice.js';
import { coerceError } from '../core/errors.js';
import { extensionOf, FileTooLarge } from '../core/files.js';
import { readGroupConfig } from '../core/group-config.js';
import type { Logger } from '../core/log.js';
import { STAND_IN_TEXT } from '../core/platforms.js';
import type { Signals } from '../core/signals.js';
import { parseJid } from '../core/types.js';
import { createDrainWorker, type DrainWorker } from '../core/worker.js';
import type { Db } from '../store/db.js';
import {
  dueTranscriptions,
  finishTranscription,
  nextTranscriptionDue,
  orphanTranscriptions,
  retryTranscription,
  type DueTranscription,
  type TranscriptionOutcome,
} from '../store/transcriptions.js';
import { durationOf, NotAudio, spokenLength } from './audio.js';
import { TranscribeError, type Transcriber } from './transcribers.js';

/**
 * What the worker asks of a chat's channel (the started channels; `Channel` in channels/channel.ts has these
 * members, written here by shape because voice/ sits beside channels/, not above it).
 */
export interface AudioChannel {
  readonly platform: string;
  /** The bytes of an attachment by the `source` the channel's map wrote. */
  fetchAttachment?(source: string, maxBytes: number): Promise<{ data: Buffer; mime: string | null }>;
  /** A row's transcript (or its note) is written: the channel may show it (web chat tabs). */
  transcribed?(messageId: number): void;
}

/** What the transcription worker needs; gated/voice.ts makes the real parts. */
export interface TranscriptionWorkerOptions {
  db: Db;
  transcriber: Transcriber;
  /** The started channels: audio is fetched through the channel of its chat, which is told when it settled. */
  channels: readonly AudioChannel[];
  bounds: Pick<TranscribeConfig, 'maxSeconds' | 'maxBytes' | 'timeoutMs' | 'attempts'>;
  /** GATED_CONFIG_DIR: a group's language is its voice.json there (undefined: the transcriber's default). */
  configDir: string;
  /** A folder of gated's own (beside the database) where audio waits while it is transcribed. */
  spoolDir: string;
  log: Logger;
  /** Hears `transcribe` (a row awaits its transcript); fires `inbound` when one is transcribed. */
  signals: Pick<Signals, 'transcribe' | 'inbound'>;
  now?: () => number;
  /** Spacing of retries (default 2 s doubling to 2 min). */
  backoff?: BackoffOptions;
  /** The timer fallback, in ms (default 1000): rows another process marked. */
  pollMs?: number;
}

/** The running worker: idle() waits out the transcription in flight. */
export type TranscriptionWorker = DrainWorker;

/**
 * Transcribes inbound audio before its row is routed (docs/VOICE.md). It takes pending transcriptions one at
 * a time (speech recognition is CPU work; two at once on a small machine only make both slow), fetches the
 * audio into its spool, checks size and length, asks the transcriber, and writes the transcript into the row
 * in one transaction (store/transcriptions.ts). A failure is retried after the one backoff; after the last
 * attempt, or at once when trying again cannot help (too long, too large, not audio, a refused key), the row
 * goes on with a note instead of words, and its audio stays attached. It runs beside the gateway: rows
 * without audio never wait for it.
 */
export function createTranscriptionWorker(opts: TranscriptionWorkerOptions): TranscriptionWorker {
  const { db, log } = opts;
  const now = opts.now ?? Date.now;
  return createDrainWorker({
    name: 'transcriber',
    log,
    now,
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
    listen: (wake) => opts.signals.transcribe.on(wake),
    // Audio a killed gated left in the spool is fetched again with its row.
    beforeStart: () => rm(opts.spoolDir, { recursive: true, force: true }),
    drain: async (stopped) => {
      await mkdir(opts.spoolDir, { recursive: true });
      for (const id of orphanTranscriptions(db)) {
        finish(opts, id, '', {
          state: 'failed',
          note: 'its audio is gone',
          error: 'no audio attachment',
          durationS: null,
        });
      }
      for (;;) {
        if (stopped()) return undefined;
        const [due] = dueTranscriptions(db, now(), 1);
        if (!due) break;
        await transcribeOne(opts, due, now);
      }
      return nextTranscriptionDue(db);
    },
  });
}

/** One transcription: fetched, checked, transcribed and written, or retried later, or given up with a note. */
async function transcribeOne(
  opts: TranscriptionWorkerOptions,
  t: DueTranscription,
  now: () => number,
): Promise<void> {
  const { bounds } = opts;
  const tlog = opts.log.child({ message: t.message_id });
  if (t.size !== null && t.size > bounds.maxBytes) {
    const note = `it is ${megabytes(t.size)}, larger than the ${megabytes(bounds.maxBytes)} limit`;
    return finish(opts, t, t.content, { state: 'refused', note, error: note, durationS: null });
  }
  const dir = await mkdtemp(join(opts.spoolDir, `${t.message_id}-`));
  let durationS: number | null = null;
  try {
    const fetched = await fetchAudio(opts.channels, t.chat_jid, t.source, bounds.maxBytes);
    const mime = t.mime ?? fetched.mime;
    const file = join(dir, `audio.${extensionOf(mime)}`);
    await writeFile(file, fetched.data);
    durationS = await durationOf(file);
    if (durationS > bounds.maxSeconds) {
      const note = `it is ${spokenLength(durationS)} long, longer than the ${spokenLength(bounds.maxSeconds)} limit`;
      tlog.info({ seconds: durationS, max: bounds.maxSeconds }, 'audio refused: too long');
      return finish(opts, t, t.content, { state: 'refused', note, error: note, durationS });
    }
    const started = performance.now();
    const language = t.group_folder
      ? readGroupConfig(opts.configDir, t.group_folder).voice.language
      : undefined;
    const raw = await opts.transcriber.transcribe({ file, mime, language, timeoutMs: bounds.timeoutMs });
    const text = cleanTranscript(raw);
    const tookMs = Math.round(performance.now() - started);
    if (text === '') {
      const note = 'no words were recognised in it';
      return finish(opts, t, t.content, { state: 'failed', note, error: note, durationS });
    }
    tlog.info(
      { seconds: durationS, tookMs, chars: text.length, via: opts.transcriber.name },
      'audio transcribed',
    );
    finish(opts, t, t.content, {
      state: 'done',
      text,
      durationS,
      transcriber: opts.transcriber.name,
      tookMs,
    });
  } catch (err) {
    failed(opts, t, err, durationS, now, tlog);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A failed attempt: retried after the backoff, or (last attempt, or hopeless) the row goes on with a note. */
function failed(
  opts: TranscriptionWorkerOptions,
  t: DueTranscription,
  err: unknown,
  durationS: number | null,
  now: () => number,
  tlog: Logger,
): void {
  if (err instanceof FileTooLarge) {
    const note = `it is larger than the ${megabytes(opts.bounds.maxBytes)} limit`;
    return finish(opts, t, t.content, { state: 'refused', note, error: note, durationS });
  }
  const reason = coerceError(err).message.slice(0, 500);
  const hopeless = err instanceof NotAudio || (err instanceof TranscribeError && !err.retry);
  if (hopeless || t.attempts + 1 >= opts.bounds.attempts) {
    tlog.warn(
      { attempts: t.attempts + 1, err: reason },
      'transcription failed for good; the row goes on with a note',
    );
    const note = err instanceof NotAudio ? `the file ${reason}` : `the transcriber failed (${reason})`;
    return finish(opts, t, t.content, { state: 'failed', note, error: reason, durationS });
  }
  const asked = err instanceof TranscribeError ? err.retryAfterMs : undefined;
  const wait = asked ?? backoffDelay(t.attempts + 1, { baseMs: 2000, maxMs: 120_000, ...opts.backoff });
  tlog.info({ attempt: t.attempts + 1, waitMs: wait, err: reason }, 'transcription failed; retrying');
  retryTranscription(opts.db, t.message_id, now() + wait, reason);
}

/** Writes the outcome into the row and wakes the poll loop, which routes the row now. */
function finish(
  opts: TranscriptionWorkerOptions,
  t: DueTranscription | number,
  original: string,
  outcome: TranscriptionOutcome,
): void {
  const id = typeof t === 'number' ? t : t.message_id;
  const content = contentOf(original, outcome);
  if (!finishTranscription(opts.db, id, outcome, (opts.now ?? Date.now)(), content)) return;
  opts.signals.inbound.fire();
  if (typeof t !== 'number') channelOf(opts.channels, t.chat_jid)?.transcribed?.(id);
}

/** The started channel of a chat's platform, if any. */
function channelOf(channels: readonly AudioChannel[], chatJid: string): AudioChannel | undefined {
  const { platform } = parseJid(chatJid);
  return channels.find((c) => c.platform === platform);
}

/** An attachment's bytes from the channel of its chat; a channel that is not running is a retryable failure. */
function fetchAudio(
  channels: readonly AudioChannel[],
  chatJid: string,
  source: string,
  maxBytes: number,
): Promise<{ data: Buffer; mime: string | null }> {
  const channel = channelOf(channels, chatJid);
  if (!channel?.fetchAttachment)
    return Promise.reject(
      new TranscribeError(`the ${parseJid(chatJid).platform} channel is not running`, true),
    );
  return channel.fetchAttachment(source, maxBytes);
}

/**
 * The row's text after transcription: the caption the user wrote (if any), then the transcript; or, when
 * there is none, a note that says why, so the agent knows a voice message came and was not understood.
 */
export function contentOf(original: string, outcome: TranscriptionOutcome): string {
  // The channel's stand-in for the files (core/platforms.ts) is not the user's caption.
  const caption = original.replace(STAND_IN_TEXT, '').trim();
  const words =
    outcome.state === 'done'
      ? outcome.text
      : `[voice message not transcribed: ${outcome.note}; the audio is attached]`;
  return caption ? `${caption}\n\n${words}` : words;
}

/** Most characters of a transcript kept (an hour of speech is about 60,000). */
const MAX_TRANSCRIPT = 100_000;

/** A transcriber's output as row text: whitespace collapsed, control characters out, bounded. */
export function cleanTranscript(raw: string): string {
  const text = raw
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return text.slice(0, MAX_TRANSCRIPT);
}

function megabytes(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}
