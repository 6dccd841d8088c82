import { realpath } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { Readable } from 'node:stream';
import { Hono, type Context } from 'hono';
import { UsageError } from '../core/errors.js';
import { mimeOf, safeFileName, type AttachmentKind, type NewAttachment } from '../core/files.js';
import type { Logger } from '../core/log.js';
import { realGroupDirOf } from '../core/group-dir.js';
import { FileRefused, openInFolder, relativeInside, spoolOf, type OpenedFile } from '../core/safe-file.js';
import { isValidFolder } from '../core/types.js';
import {
  INLINE_AUDIO_RE,
  INLINE_IMAGE_RE,
  MAX_UPLOAD_FILES,
  webJid,
  type ChatFile,
  type WebChannel,
} from '../channels/web/index.js';
import { lineSeen, type ChatReaders } from './chat-view.js';
import { chatPostFields, nonNegInt } from './chat.js';
import { parseUpload, UploadRefused, type ParsedUpload } from './multipart.js';
import type { ChatFileRow, Queries } from './queries.js';

/** What the chat's file endpoints need. */
export interface ChatFilesDeps {
  q: Queries;
  web: WebChannel;
  log: Logger;
  /** GATED_GROUPS_DIR: files are served from inside these folders only. */
  groupsDir: string | undefined;
  /** GATED_MAX_ATTACHMENT_BYTES: the most one upload (all its files together) may hold. */
  maxBytes: number;
  /** What each viewer may read of a chat (its files included). */
  readers: ChatReaders;
}

// A type the browser claims for a file; anything else is replaced by the type the name suggests.
const MIME_RE = /^[a-z]+\/[a-z0-9][a-z0-9.+-]{0,100}$/i;

function kindOf(mime: string): AttachmentKind {
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'document';
}

/**
 * Files in the web chat (docs/WEB.md, "Files"). `POST /upload` (multipart: the fields of `/send` plus one
 * or more `file`s) stages the files and stores the message with them as attachments, which the inbox
 * downloader saves into the group's folder as for any platform. `GET /file?group=&id=&seq=` serves one
 * file of a row of that group's web chat (an upload once saved, or a file of a reply) and nothing else:
 * the file must be a regular file inside its group's folder, reached through no symlink.
 */
export function chatFileRoutes(deps: ChatFilesDeps): Hono {
  const app = new Hono();
  app.post('/upload', async (c) => {
    if (!/^multipart\/form-data\b/i.test(c.req.header('content-type') ?? '')) {
      return c.json({ error: 'send multipart/form-data' }, 415);
    }
    if (!deps.web.started) return c.json({ error: 'the web chat is not started' }, 503);
    return upload(deps, c);
  });
  app.get('/file', (c) => serveFile(deps, c));
  return app;
}

/** One upload admitted by the bounds (http/bounds.ts): parse as a stream (http/multipart.ts), stage, store. */
async function upload(deps: ChatFilesDeps, c: Context): Promise<Response> {
  const { q, web } = deps;
  let parsed: ParsedUpload;
  try {
    parsed = await parseUpload(c.req.header('content-type') ?? '', c.req.raw.body, web.uploads, {
      maxBytes: deps.maxBytes,
      maxFiles: MAX_UPLOAD_FILES,
      fileField: 'file',
    });
  } catch (err) {
    if (!(err instanceof UploadRefused)) throw err;
    // What the upload carried, for the bytes of the hour when it announced no length.
    c.set('uploadBytes', err.bytes);
    return c.json({ error: err.message }, err.status);
  }
  const staged = parsed.files;
  c.set(
    'uploadBytes',
    staged.reduce((n, f) => n + f.size, 0),
  );
  const dropAll = () => Promise.all(staged.map((f) => web.uploads.drop(f.source).catch(() => undefined)));
  const refuse = async (error: string, status: 400 | 404) => {
    await dropAll();
    return c.json({ error }, status);
  };
  const post = chatPostFields(parsed.fields, c.get('viewer').sender);
  const folder = post.folder;
  if (!isValidFolder(folder)) return refuse(`bad group folder '${folder}'`, 400);
  if (!q.hasGroup(folder)) return refuse(`no group '${folder}'`, 404);
  if (staged.length === 0) return refuse('no file in the field "file"', 400);
  const attachments: NewAttachment[] = staged.map((f) => {
    const name = safeFileName(f.filename);
    // busboy says text/plain both for that claim and for none or an unreadable one: the name decides then.
    const claimed = f.mimeType === 'text/plain' ? '' : f.mimeType;
    const mime = MIME_RE.test(claimed) ? claimed.toLowerCase() : mimeOf(name);
    return { kind: kindOf(mime), name, mime, size: f.size, source: f.source };
  });
  try {
    const id = await web.post({ ...post, attachments });
    if (id === null) {
      await dropAll();
      return c.json({ id: null, duplicate: true }, 200);
    }
    const shown: ChatFile[] = attachments.map((a, seq) => ({
      seq,
      name: a.name,
      mime: a.mime!,
      size: a.size,
      ready: false,
    }));
    return c.json({ id, files: shown }, 201);
  } catch (err) {
    await dropAll();
    if (err instanceof UsageError) return c.json({ error: err.message }, 400);
    throw err;
  }
}

/** `GET /file`: one file of a line this viewer may read, opened safely inside the group's folder. */
async function serveFile(deps: ChatFilesDeps, c: Context): Promise<Response> {
  const { q, log } = deps;
  const folder = c.req.query('group') ?? '';
  const id = nonNegInt(c.req.query('id'));
  const seq = nonNegInt(c.req.query('seq'));
  if (!isValidFolder(folder) || id === undefined || seq === undefined)
    return c.json({ error: 'give group, id and seq' }, 400);
  if (!deps.groupsDir) return c.json({ error: 'no group folders here' }, 404);
  const row = q.chatFile(id, seq);
  // Only rows of this group's web chat: an id of another chat is as unknown as a missing one.
  if (!row?.path || row.chat_jid !== webJid(folder)) return c.json({ error: 'no such file' }, 404);
  // A file of a line this viewer may not read is as unknown as a missing one.
  const role = row.is_from_me ? 'agent' : 'user';
  if (
    !lineSeen(deps.readers.only(folder, c.get('viewer')), {
      role,
      sender: row.sender,
      reply_to: row.reply_to,
    })
  )
    return c.json({ error: 'no such file' }, 404);
  const group = row.group_folder && isValidFolder(row.group_folder) ? row.group_folder : folder;
  return sendFolderFile(deps.groupsDir, log, c, { id, seq, row, group });
}

/**
 * Sends file `seq` of row `id`, read from inside `group`'s folder through core/safe-file.ts: 404 when it is
 * gone, 403 with the reason when it is not a plain file reached without links. Pictures and audio inline
 * with their type, everything else as an attachment.
 */
async function sendFolderFile(
  groupsDir: string,
  log: Logger,
  c: Context,
  f: { id: number; seq: number; row: ChatFileRow; group: string },
): Promise<Response> {
  const { id, seq, row, group } = f;
  if (!row.path) return c.json({ error: 'no such file' }, 404);
  let root: string | undefined;
  try {
    // The groups folder's links are the operator's; the group's own entry is walked without following.
    root = realGroupDirOf(groupsDir, group);
  } catch {
    root = undefined;
  }
  if (!root) return c.json({ error: 'no such file' }, 404);
  // Opened now under core/safe-file.ts: its type is checked before it is opened (a FIFO never hangs the
  // request) and a link the agent swapped in since the file was listed is refused, not followed.
  let opened: OpenedFile;
  try {
    // Taken through the groups folder's spool: a hard link to a file outside cannot be raced past the check.
    const spool = await spoolOf(await realpath(groupsDir));
    opened = await openInFolder(
      root,
      isAbsolute(row.path) ? relativeInside(root, row.path) : row.path,
      spool,
    );
  } catch (err) {
    if (!(err instanceof FileRefused)) throw err;
    if (err.reason === 'missing') return c.json({ error: 'no such file' }, 404);
    log.warn({ id, seq, group, reason: err.reason }, 'chat file refused');
    return c.json({ error: `file refused: ${err.reason}` }, 403);
  }
  const { handle: fh, stat: st } = opened;
  try {
    const mime = row.mime ?? 'application/octet-stream';
    const inline = INLINE_IMAGE_RE.test(mime) || INLINE_AUDIO_RE.test(mime);
    const stream = Readable.toWeb(fh.createReadStream()) as unknown as ReadableStream;
    return c.body(stream, 200, {
      'Content-Type': inline ? mime : 'application/octet-stream',
      'Content-Length': String(st.size),
      'Content-Disposition': `${inline ? 'inline' : 'attachment'}; filename*=UTF-8''${encodeURIComponent(row.name)}`,
      'Cache-Control': 'private, max-age=3600',
    });
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
}

/** What the dashboard's audio endpoint needs. */
export interface DashboardAudioDeps {
  q: Queries;
  log: Logger;
  groupsDir: string | undefined;
}

/**
 * `GET /audio?id=&seq=` of the dashboard (behind its read access): an audio file of any chat's row, a
 * voice message or a spoken reply, so the chat view plays it beside its transcript (docs/VOICE.md). Only
 * audio is served here, from inside the row's group folder as the web chat's files are.
 */
export function dashboardAudioRoutes(deps: DashboardAudioDeps): Hono {
  const app = new Hono();
  app.get('/audio', async (c) => {
    const id = nonNegInt(c.req.query('id'));
    const seq = nonNegInt(c.req.query('seq'));
    if (id === undefined || seq === undefined) return c.json({ error: 'give id and seq' }, 400);
    const row = deps.q.chatFile(id, seq);
    const group = row?.group_folder;
    if (!deps.groupsDir || !row || !INLINE_AUDIO_RE.test(row.mime ?? '') || !group || !isValidFolder(group))
      return c.json({ error: 'no such audio' }, 404);
    return sendFolderFile(deps.groupsDir, deps.log, c, { id, seq, row, group });
  });
  return app;
}
