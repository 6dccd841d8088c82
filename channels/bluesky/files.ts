import { DeliveryError } from '../../core/errors.js';
import { extensionOf, FileTooLarge, type NewAttachment } from '../../core/files.js';
import type { FetchedFile, SendFile } from '../channel.js';
import { toDeliveryError } from './errors.js';
import type { ReplyPoster } from './send.js';
import type { BlueskySession } from './session.js';

/**
 * Bluesky files both ways. Inbound: the images of a post (`app.bsky.embed.images`, also as the media of a
 * quote), kept as `did|cid` and fetched with getBlob from the author's PDS. Outbound: an image file becomes
 * a post with an image embed, threaded like a text part; Bluesky carries no other file types.
 */

/** The largest image blob a Bluesky post accepts. */
export const BLUESKY_IMAGE_MAX = 1_000_000;

interface BlobJson {
  ref?: { $link?: string; toString(): string };
  mimeType?: string;
  size?: number;
}

interface ImagesEmbed {
  $type?: string;
  images?: Array<{ alt?: string; image?: BlobJson }>;
  media?: ImagesEmbed;
}

/** The images of a post record by `author`, in order. */
export function attachmentsOf(embed: unknown, author: string): NewAttachment[] {
  const e = embed as ImagesEmbed | undefined;
  const images = e?.images ?? e?.media?.images ?? [];
  const out: NewAttachment[] = [];
  images.forEach((img, i) => {
    const ref = img.image?.ref;
    const cid = ref?.$link ?? (ref ? ref.toString() : undefined);
    if (!cid || cid === '[object Object]') return;
    const mime = img.image?.mimeType ?? null;
    out.push({
      kind: 'image',
      name: `image-${i + 1}.${extensionOf(mime)}`,
      mime,
      size: img.image?.size ?? null,
      source: `${author}|${cid}`,
    });
  });
  return out;
}

/** Fetches a blob named `did|cid` from the PDS (sync.getBlob). */
export async function fetchBlueskyBlob(
  session: BlueskySession,
  source: string,
  maxBytes: number,
): Promise<FetchedFile> {
  const [did, cid] = source.split('|');
  if (!did || !cid) throw new Error(`bluesky: bad blob source '${source}'`);
  const res = await session.call((a) => a.com.atproto.sync.getBlob({ did, cid }));
  const data = Buffer.from(res.data);
  if (data.length > maxBytes) throw new FileTooLarge(data.length, maxBytes);
  const type = res.headers['content-type'];
  return { data, mime: type ? type.split(';')[0]!.trim() : null };
}

/** Posts one image file as an image embed (uploaded as a blob first). Other types are refused. */
export async function sendBlueskyImage(
  poster: ReplyPoster,
  session: BlueskySession,
  file: SendFile,
): Promise<string> {
  if (file.as !== 'photo')
    throw new DeliveryError('permanent', `bluesky carries only images, not ${file.mime} (${file.name})`);
  const data = file.data;
  if (data.length > BLUESKY_IMAGE_MAX)
    throw new DeliveryError('permanent', new FileTooLarge(data.length, BLUESKY_IMAGE_MAX).message);
  let blob;
  try {
    blob = await session.call((a) => a.uploadBlob(data, { encoding: file.mime }));
  } catch (err) {
    throw toDeliveryError(err);
  }
  const embed = {
    $type: 'app.bsky.embed.images',
    images: [{ alt: file.name, image: blob.data.blob }],
  };
  return poster.send({ ...file, text: '' }, embed);
}
