import type { Message } from 'telegraf/types';
import { extensionOf, type AttachmentKind, type NewAttachment } from '../../core/files.js';

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
    return [fileOf('photo', 'photo.jpg', 'image/jpeg', best)];
  }
  if ('voice' in msg) {
    const mime = msg.voice.mime_type ?? 'audio/ogg';
    return [fileOf('voice', `voice.${extensionOf(mime)}`, mime, msg.voice)];
  }
  // A round video of someone talking: transcribed like a voice note (docs/VOICE.md).
  if ('video_note' in msg) return [fileOf('video_note', 'video_note.mp4', 'video/mp4', msg.video_note)];
  for (const kind of ['document', 'audio', 'video'] as const) {
    if (!(kind in msg)) continue;
    const f = (
      msg as unknown as Record<
        string,
        { file_id: string; file_name?: string; mime_type?: string; file_size?: number }
      >
    )[kind]!;
    const mime = f.mime_type ?? null;
    return [fileOf(kind, f.file_name ?? `${kind}.${extensionOf(mime)}`, mime, f)];
  }
  return [];
}

/** One attachment of a Telegram file: only its file_id is kept, the bytes are fetched later. */
function fileOf(
  kind: AttachmentKind,
  name: string,
  mime: string | null,
  f: { file_id: string; file_size?: number },
): NewAttachment {
  return { kind, name, mime, size: f.file_size ?? null, source: f.file_id };
}
