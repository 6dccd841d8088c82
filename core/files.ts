/**
 * Files that travel with messages (docs/PROTOCOL.md, "Files"): what a channel says about an inbound
 * attachment, how names are made safe for a folder, and how a file's type picks the way it is sent.
 */

/** What kind of media an inbound attachment was on its platform. */
export type AttachmentKind = 'photo' | 'document' | 'voice' | 'audio' | 'video' | 'video_note' | 'image';

/**
 * One attachment of an inbound event, as its channel saw it. The bytes are not here: `source` tells the
 * same channel's `fetchAttachment` where to get them later (a Telegram file_id, a Discord CDN URL, a
 * Bluesky `did|cid`), so storing the message never waits on a download.
 */
export interface NewAttachment {
  kind: AttachmentKind;
  /** The file name the user gave (or one made from the kind); sanitised before it touches a disk. */
  name: string;
  mime: string | null;
  /** Size the platform announced, in bytes, if it did. */
  size: number | null;
  /** Platform locator, meaningful only to the channel that wrote it. */
  source: string;
}

/**
 * Whether an attachment holds speech to transcribe (docs/VOICE.md): a voice note, an audio file, a video note
 * (a Telegram round video, which is someone talking), or any file whose type is audio. A plain video is not:
 * its sound is rarely a message.
 */
export function isAudio(a: Pick<NewAttachment, 'kind' | 'mime'>): boolean {
  return (
    a.kind === 'voice' ||
    a.kind === 'audio' ||
    a.kind === 'video_note' ||
    (a.mime !== null && a.mime.toLowerCase().startsWith('audio/'))
  );
}

/** How an outbound file goes out: an inline picture, a voice note, or a plain document. */
export type SendAs = 'photo' | 'voice' | 'document';

const MIME_BY_EXT: Readonly<Record<string, string>> = {
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  webp: 'image/webp',
  ogg: 'audio/ogg',
  oga: 'audio/ogg',
  opus: 'audio/ogg',
  mp3: 'audio/mpeg',
  m4a: 'audio/mp4',
  wav: 'audio/wav',
  mp4: 'video/mp4',
  webm: 'video/webm',
  mov: 'video/quicktime',
  pdf: 'application/pdf',
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  json: 'application/json',
  html: 'text/html',
  zip: 'application/zip',
};

/** The MIME type a file name suggests, or `application/octet-stream`. */
export function mimeOf(name: string): string {
  const dot = name.lastIndexOf('.');
  const ext = dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
  return MIME_BY_EXT[ext] ?? 'application/octet-stream';
}

/** A file extension for a MIME type (used when a platform gives a type but no name). */
export function extensionOf(mime: string | null): string {
  if (!mime) return 'bin';
  for (const [ext, m] of Object.entries(MIME_BY_EXT)) if (m === mime) return ext;
  return 'bin';
}

/**
 * Photos go out as pictures (the formats every platform renders inline), Ogg audio as a voice note,
 * everything else as a document, so nothing is re-encoded or refused for its type.
 */
export function sendAsOf(mime: string): SendAs {
  if (/^image\/(jpeg|png|gif|webp)$/.test(mime)) return 'photo';
  if (mime === 'audio/ogg') return 'voice';
  return 'document';
}

const MAX_NAME = 100;

/**
 * A name that is safe as one path segment on any filesystem: no separators, no control or shell-special
 * characters, no leading dots (no `..`, no hidden files), at most 100 characters with the extension kept.
 * Never empty: falls back to `file`.
 */
export function safeFileName(raw: string): string {
  const base = raw.split(/[\\/]/).pop() ?? '';
  let name = base
    .normalize('NFC')
    // Control and format characters (a right-to-left override can disguise `gpj.exe` as `exe.jpg`) too.
    .replace(/[\p{Cc}\p{Cf}<>:"|?*`$;&'!{}[\]()#%\s]+/gu, '_')
    .replace(/^[._-]+/, '')
    .replace(/_+/g, '_');
  if (name.length > MAX_NAME) {
    const dot = name.lastIndexOf('.');
    const ext = dot > 0 && name.length - dot <= 10 ? name.slice(dot) : '';
    name = name.slice(0, MAX_NAME - ext.length) + ext;
  }
  return name === '' ? 'file' : name;
}

/** A file is larger than the configured cap: it is not downloaded (or not sent), and nobody retries it. */
export class FileTooLarge extends Error {
  override readonly name = 'FileTooLarge';
  constructor(
    readonly bytes: number,
    readonly maxBytes: number,
  ) {
    super(`file of ${bytes} bytes is over the limit of ${maxBytes} bytes`);
  }
}
