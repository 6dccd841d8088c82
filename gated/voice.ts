import { mkdir, mkdtemp } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Channel } from '../channels/channel.js';
import { readGroupConfig } from '../core/group-config.js';
import { parseJid } from '../core/types.js';
import { createTranscriptionWorker, type TranscriptionWorker } from '../voice/transcriber.js';
import { TranscribeError, transcriberOf } from '../voice/transcribers.js';
import type { Base } from './base.js';
import { SpokenReplies } from '../delivery/spoken.js';
import { speak } from '../voice/speech.js';

/**
 * The transcription worker when a transcriber is configured (docs/VOICE.md): audio is fetched through the
 * channel of its chat, into a folder of gated's own beside the database, never into a group's folder.
 */
export function startTranscriber(base: Base, started: Channel[]): TranscriptionWorker | undefined {
  const { config, log, db, signals } = base;
  if (!config.transcribe) return undefined;
  const spoolDir = join(dirname(config.db), 'transcribing');
  const tmpDir = () => mkdtemp(join(spoolDir, 'tmp-'));
  const channelOf = (chatJid: string) => started.find((c) => c.platform === parseJid(chatJid).platform);
  return createTranscriptionWorker({
    db,
    transcriber: transcriberOf(config.transcribe.via, tmpDir),
    fetchAudio: (chatJid, source, maxBytes) => {
      const channel = channelOf(chatJid);
      if (!channel?.fetchAttachment)
        return Promise.reject(
          new TranscribeError(`the ${parseJid(chatJid).platform} channel is not running`, true),
        );
      return channel.fetchAttachment(source, maxBytes);
    },
    bounds: config.transcribe,
    language: (group) => (group ? readGroupConfig(config.configDir, group).voice.language : undefined),
    settled: (chatJid, id) => channelOf(chatJid)?.transcribed?.(id),
    spoolDir,
    log: log.child({ part: 'transcriber' }),
    signals,
  });
}

/** Spoken replies (docs/VOICE.md): the groups whose voice.json says `"speak": true` get their replies spoken. */
export function spokenReplies(base: Base): SpokenReplies {
  const { config, log, db } = base;
  const tmpRoot = join(dirname(config.db), 'speaking');
  return new SpokenReplies({
    db,
    groupsDir: config.groupsDir,
    configDir: config.configDir,
    speak: async (text, voice) => {
      await mkdir(tmpRoot, { recursive: true });
      return speak(config.ttsCmd, { text, voice, timeoutMs: 60_000, tmpRoot });
    },
    log: log.child({ part: 'spoken' }),
  });
}
