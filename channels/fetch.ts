import { FileTooLarge } from '../core/files.js';
import type { FetchedFile } from './channel.js';

/**
 * Downloads `url` into memory, refusing more than `maxBytes`: a Content-Length over the cap stops before
 * the body, and a body that runs past it (no or a lying length) is cut off. Non-2xx answers throw, with
 * the status but never the URL (Telegram's file URLs hold the bot token).
 */
export async function fetchCapped(
  url: string,
  maxBytes: number,
  init: RequestInit = {},
): Promise<FetchedFile> {
  const res = await fetch(url, { ...init, signal: init.signal ?? AbortSignal.timeout(60_000) });
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`download failed: HTTP ${res.status}`);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel();
    throw new FileTooLarge(declared, maxBytes);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      total += chunk.byteLength;
      if (total > maxBytes) throw new FileTooLarge(total, maxBytes);
      chunks.push(Buffer.from(chunk));
    }
  }
  const type = res.headers.get('content-type');
  return { data: Buffer.concat(chunks), mime: type ? type.split(';')[0]!.trim() : null };
}
