import { UsageError } from './errors.js';
import { int, str, type Env } from './config-read.js';

/**
 * The voice settings (docs/VOICE.md): how inbound audio is transcribed, if at all, its bounds, and the
 * text-to-speech command of spoken replies. Transcription is off unless GATED_TRANSCRIBE_URL or
 * GATED_TRANSCRIBE_CMD names a transcriber.
 */
export interface VoiceConfig {
  /** How inbound audio becomes text; undefined: it is not transcribed (it stays an attachment). */
  transcribe: TranscribeConfig | undefined;
  /** GATED_TTS_CMD: the text-to-speech command of spoken replies; `espeak-ng` (the default) is built in. */
  ttsCmd: string;
}

/** One transcriber and the bounds of what it is given. */
export interface TranscribeConfig {
  /** An OpenAI-compatible endpoint, or a command (`pocketsphinx`: the built-in local default). */
  via:
    | { kind: 'endpoint'; url: string; key: string | undefined; model: string; format: 'json' | 'text' }
    | { kind: 'command'; command: string };
  /** GATED_TRANSCRIBE_MAX_SECONDS: longer audio is refused with a note (default 600). */
  maxSeconds: number;
  /** GATED_TRANSCRIBE_MAX_BYTES: larger audio is refused unread (default 25 MiB, the OpenAI API's own limit). */
  maxBytes: number;
  /** GATED_TRANSCRIBE_TIMEOUT_MS: one attempt's limit (default 120000). */
  timeoutMs: number;
  /** GATED_TRANSCRIBE_ATTEMPTS: attempts before the row goes on with a note instead (default 4). */
  attempts: number;
}

/** Reads the voice settings; a half-made one (a URL and a command, an unknown format) is a named error. */
export function voiceConfig(env: Env): VoiceConfig {
  return { transcribe: transcribeConfig(env), ttsCmd: str(env, 'GATED_TTS_CMD') ?? 'espeak-ng' };
}

function transcribeConfig(env: Env): TranscribeConfig | undefined {
  const url = str(env, 'GATED_TRANSCRIBE_URL');
  const command = str(env, 'GATED_TRANSCRIBE_CMD');
  if (url === undefined && command === undefined) return undefined;
  if (url !== undefined && command !== undefined)
    throw new UsageError('set GATED_TRANSCRIBE_URL or GATED_TRANSCRIBE_CMD, not both');
  const bounds = {
    maxSeconds: int(env, 'GATED_TRANSCRIBE_MAX_SECONDS', 600, 1),
    maxBytes: int(env, 'GATED_TRANSCRIBE_MAX_BYTES', 25 * 1024 * 1024, 1),
    timeoutMs: int(env, 'GATED_TRANSCRIBE_TIMEOUT_MS', 120_000, 100),
    attempts: int(env, 'GATED_TRANSCRIBE_ATTEMPTS', 4, 1),
  };
  if (command !== undefined) return { via: { kind: 'command', command }, ...bounds };
  if (!/^https?:\/\/[^/]/.test(url!)) throw new UsageError('GATED_TRANSCRIBE_URL must be an http(s) URL');
  const format = str(env, 'GATED_TRANSCRIBE_FORMAT') ?? 'json';
  if (format !== 'json' && format !== 'text')
    throw new UsageError(`GATED_TRANSCRIBE_FORMAT must be 'json' or 'text', got '${format}'`);
  const model = str(env, 'GATED_TRANSCRIBE_MODEL') ?? 'whisper-1';
  return {
    via: { kind: 'endpoint', url: url!, key: str(env, 'GATED_TRANSCRIBE_KEY'), model, format },
    ...bounds,
  };
}
