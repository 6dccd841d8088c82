import type { Message } from 'telegraf/types';
import { extensionOf, type NewAttachment } from '../../core/files.js';

/**
 * The attachments of a Telegram message: the largest size of a photo, a document, a voice note, audio, a
 * video note or a video. Only the file_id is kept; the bytes are fetched after the row is routed (files.ts).
 */
/** The attachments of one message (Telegram sends at most one file per message). */
export function attachmentsOf(msg: Message): NewAttachment[] {
  if ('photo' in msg && msg.photo.length > 0) {
    // Telegram lists the sizes smallest first; the largest is what the user sent.
    const best = msg.photo.reduce((a, b) =>
      (b.file_size ?? b.width * b.height) > (a.file_size ?? a.width * a.height) ? b : a,
    );
    return [
      {
        kind: 'photo',
        name: 'photo.jpg',
        mime: 'image/jpeg',
        size: best.file_size ?? null,
        source: best.file_id,
      },
    ];
  }
  if ('voice' in msg) {
    const v = msg.voice;
    const mime = v.mime_type ?? 'audio/ogg';
    return [
      {
        kind: 'voice',
        name: `voice.${extensionOf(mime)}`,
        mime,
        size: v.file_size ?? null,
        source: v.file_id,
      },
    ];
  }
  if ('video_note' in msg) {
    // A round video of someone talking: transcribed like a voice note (docs/VOICE.md).
    const v = msg.video_note;
    return [
      {
        kind: 'video_note',
        name: 'video_note.mp4',
        mime: 'video/mp4',
        size: v.file_size ?? null,
        source: v.file_id,
      },
    ];
  }
  for (const kind of ['document', 'audio', 'video'] as const) {
    if (!(kind in msg)) continue;
    const f = (
      msg as unknown as Record<
        string,
        { file_id: string; file_name?: string; mime_type?: string; file_size?: number }
      >
    )[kind]!;
    const mime = f.mime_type ?? null;
    const name = f.file_name ?? `${kind}.${extensionOf(mime)}`;
    return [{ kind, name, mime, size: f.file_size ?? null, source: f.file_id }];
  }
  return [];
}
