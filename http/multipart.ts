import { once } from 'node:events';
import busboy from 'busboy';
import type { UploadStage } from '../channels/web/uploads.js';

/**
 * A multipart upload parsed as a stream (busboy): each file goes to the upload stage on disk as its bytes
 * arrive, never whole into memory, and the parse is a few native boundary searches per chunk between
 * reads. So a 20 MiB upload holds the event loop for no longer than one chunk's work, where a whole-body
 * parse (Request.formData) held it for about a second while every other chat waited.
 */

/** One file of an upload, staged (UploadStage). */
export interface StagedPart {
  /** The attachment source of the staged bytes (`upload:<uuid>`). */
  source: string;
  /** The name the client gave, as sent (not made safe yet). */
  filename: string;
  /** The type the client claimed ('' when none). */
  mimeType: string;
  size: number;
}

/** An upload read to its end: its text fields (the first of each name) and its staged files. */
export interface ParsedUpload {
  fields: Record<string, string>;
  files: StagedPart[];
}

/** Why an upload was refused while it was read: a status and the reason for the client. */
export class UploadRefused extends Error {
  override readonly name = 'UploadRefused';
  constructor(
    readonly status: 400 | 413,
    message: string,
    /** The bytes read before the refusal (charged to the client's hour). */
    readonly bytes: number,
  ) {
    super(message);
  }
}

/** Bounds of one upload. */
export interface UploadLimits {
  /** The most all its files together may hold (GATED_MAX_ATTACHMENT_BYTES). */
  maxBytes: number;
  /** The most files in the field named `fileField`. */
  maxFiles: number;
  /** The field whose parts are files; parts of other fields are read past and dropped. */
  fileField: string;
}

// Text fields are the chat post's few short values: these bound what a hostile form may make us hold.
const MAX_FIELDS = 32;
const MAX_FIELD_BYTES = 1024 * 1024;

/**
 * Reads a multipart body, staging the files of `limits.fileField` as they stream. Rejects with
 * UploadRefused (files over the size, too many files, an unreadable body) after removing what it staged.
 * The body is read to its end: how far is bounded before it (http/app.ts cuts off a body past the limit
 * plus room for the form's fields), so the refusal can say how many bytes the files held.
 */
export async function parseUpload(
  contentType: string,
  body: ReadableStream<Uint8Array> | null,
  stage: UploadStage,
  limits: UploadLimits,
): Promise<ParsedUpload> {
  const fields: Record<string, string> = {};
  const staging: Array<Promise<StagedPart | null>> = [];
  let bytes = 0;
  let extraFiles = 0;
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: { 'content-type': contentType },
      // Browsers send names and fields as UTF-8; busboy's default would read them as latin1.
      defCharset: 'utf8',
      defParamCharset: 'utf8',
      limits: { fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES },
    });
  } catch (err) {
    throw new UploadRefused(400, `unreadable multipart body: ${(err as Error).message}`, 0);
  }
  parser.on('field', (name, value) => {
    if (!(name in fields)) fields[name] = value;
  });
  parser.on('file', (name, stream, info) => {
    // A body cut off mid-part fails the file's stream too, maybe before its copy to disk listens: the
    // parser's own error is the one reported.
    stream.on('error', () => {});
    if (name !== limits.fileField) {
      stream.resume();
      return;
    }
    // Past the count, or past the size so far: read past (counted for the refusal), never stored.
    if (staging.length >= limits.maxFiles || bytes > limits.maxBytes) {
      if (staging.length >= limits.maxFiles) extraFiles++;
      stream.on('data', (chunk: Buffer) => (bytes += chunk.length));
      stream.resume();
      return;
    }
    let size = 0;
    const count = (n: number) => {
      size += n;
      bytes += n;
    };
    staging.push(
      stage.putStream(stream, count).then(
        (src) => ({ source: src, filename: info.filename ?? '', mimeType: info.mimeType ?? '', size }),
        () => null,
      ),
    );
  });
  const readError = await feed(parser, body);
  let failure =
    readError === null
      ? undefined
      : new UploadRefused(400, `unreadable multipart body: ${readError.message}`, bytes);
  const all = await Promise.all(staging);
  const files = all.filter((f): f is StagedPart => f !== null);
  if (!failure && files.length < all.length)
    failure = new UploadRefused(400, 'upload cut off while a file was stored', bytes);
  if (!failure && extraFiles > 0)
    failure = new UploadRefused(400, `at most ${limits.maxFiles} files per message`, bytes);
  if (!failure && bytes > limits.maxBytes)
    failure = new UploadRefused(
      413,
      `files of ${bytes} bytes are over the limit of ${limits.maxBytes} bytes`,
      bytes,
    );
  if (failure) {
    await Promise.all(files.map((f) => stage.drop(f.source).catch(() => undefined)));
    throw failure;
  }
  return { fields, files };
}

/**
 * Writes the web body's chunks straight into the parser, waiting when it asks to (its files go to disk at
 * their own pace), and waits for it to close: no stream conversion in between. Resolves with the error
 * that ended the read (the body's or the parser's), else null.
 */
async function feed(parser: busboy.Busboy, body: ReadableStream<Uint8Array> | null): Promise<Error | null> {
  const closed = new Promise<void>((resolve, reject) => {
    parser.once('close', resolve);
    parser.once('error', reject);
  });
  // Awaited below, or superseded by the error that ended the read: never an unhandled rejection.
  closed.catch(() => {});
  try {
    if (body) {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        if (!parser.write(chunk)) await Promise.race([once(parser, 'drain'), closed]);
      }
    }
    parser.end();
    await closed;
    return null;
  } catch (err) {
    parser.destroy();
    return err as Error;
  }
}
