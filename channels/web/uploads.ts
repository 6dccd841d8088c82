import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { FileTooLarge } from '../../core/files.js';
import type { FetchedFile } from '../channel.js';

const SOURCE_RE = /^upload:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** How long a staged upload is kept: long past any download retry, short enough not to pile up. */
export const UPLOAD_KEEP_MS = 24 * 3600_000;

/**
 * Where the web chat keeps an uploaded file between the POST and the inbox downloader (channels/inbox.ts),
 * which fetches it like any platform's file (`source` = `upload:<uuid>`) into the routed group's folder.
 * Staging outside the group folders keeps an upload invisible to agents until its message is routed, and
 * on disk (not in memory) so that a restart in between loses nothing. Staged copies older than a day are
 * swept.
 */
export class UploadStage {
  constructor(readonly dir: string) {}

  /** Stores the bytes under a fresh name; returns the attachment `source` naming them. */
  async put(data: Uint8Array): Promise<string> {
    const id = randomUUID();
    await mkdir(this.dir, { recursive: true });
    const file = join(this.dir, id);
    await writeFile(`${file}.part`, data);
    await rename(`${file}.part`, file);
    return `upload:${id}`;
  }

  /**
   * Stores a stream's bytes under a fresh name as they arrive (a multipart upload's file, never whole in
   * memory), telling `onBytes` each chunk's size; returns the attachment `source` naming them. A stream
   * that fails leaves nothing behind.
   */
  async putStream(data: Readable, onBytes?: (n: number) => void): Promise<string> {
    const id = randomUUID();
    await mkdir(this.dir, { recursive: true });
    const file = join(this.dir, id);
    const counted = async function* (src: AsyncIterable<Buffer>) {
      for await (const chunk of src) {
        onBytes?.(chunk.length);
        yield chunk;
      }
    };
    try {
      await pipeline(data, counted, createWriteStream(`${file}.part`, { flags: 'wx' }));
    } catch (err) {
      await rm(`${file}.part`, { force: true });
      throw err;
    }
    await rename(`${file}.part`, file);
    return `upload:${id}`;
  }

  /** Reads a staged upload; throws FileTooLarge past `maxBytes`, and a plain error for an unknown source. */
  async read(source: string, maxBytes: number): Promise<FetchedFile> {
    const file = this.fileOf(source);
    const size = (await stat(file)).size;
    if (size > maxBytes) throw new FileTooLarge(size, maxBytes);
    return { data: await readFile(file), mime: null };
  }

  /** Removes a staged upload (its post turned out to be a duplicate). */
  async drop(source: string): Promise<void> {
    await rm(this.fileOf(source), { force: true });
  }

  /** Removes staged uploads older than `keepMs`; returns how many. Never throws. */
  async sweep(now: number, keepMs = UPLOAD_KEEP_MS): Promise<number> {
    let n = 0;
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const name of names) {
      const file = join(this.dir, name);
      const st = await stat(file).catch(() => undefined);
      if (!st || now - st.mtimeMs < keepMs) continue;
      await rm(file, { force: true }).catch(() => undefined);
      n += 1;
    }
    return n;
  }

  // Only names this stage made are ever opened: a source is never a path.
  private fileOf(source: string): string {
    const m = SOURCE_RE.exec(source);
    if (!m) throw new Error(`not a web upload: '${source.slice(0, 60)}'`);
    return join(this.dir, m[1]!);
  }
}
