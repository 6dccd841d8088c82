import { dirname, join } from 'node:path';
import type { Channel } from '../channels/channel.js';
import { createTranscriptionWorker, type TranscriptionWorker } from '../voice/transcriber.js';
import { transcriberOf } from '../voice/transcribers.js';
import type { Base } from './base.js';
import { SpokenReplies } from '../delivery/spoken.js';
import { Speaker } from '../voice/speech.js';

/**
 * The transcription worker when a transcriber is configured (docs/VOICE.md): audio is fetched through the
 * channel of its chat, into a folder of gated's own beside the database, never into a group's folder.
 */
export function startTranscriber(base: Base, started: Channel[]): TranscriptionWorker | undefined {
  const { config, log, db, signals } = base;
  if (!config.transcribe) return undefined;
  const spoolDir = join(dirname(config.db), 'transcribing');
  return createTranscriptionWorker({
    db,
    transcriber: transcriberOf(config.transcribe.via, spoolDir),
    channels: started,
    bounds: config.transcribe,
    configDir: config.configDir,
    spoolDir,
    log: log.child({ part: 'transcriber' }),
    signals,
  });
}

/** Spoken replies (docs/VOICE.md): the groups whose voice.json says `"speak": true` get their replies spoken. */
export function spokenReplies(base: Base): SpokenReplies {
  const { config, log, db } = base;
  return new SpokenReplies({
    db,
    groupsDir: config.groupsDir,
    configDir: config.configDir,
    speaker: new Speaker(config.ttsCmd, join(dirname(config.db), 'speaking')),
    log: log.child({ part: 'spoken' }),
  });
}
