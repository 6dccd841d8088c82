/**
 * How Bluesky identities map onto gated's vocabulary.
 *
 * - Chat JID: `bluesky:<did>`, one chat per author (`bluesky:did:plc:abc…`): everything a user does to the
 *   bot (mentions, replies, quotes, follows, likes) lands in the same chat.
 * - Inbound platform_msg_id: the notification's record URI (`at://did/app.bsky.feed.post/rkey` for a post),
 *   which is what the (chat_jid, platform_msg_id) dedup keys on.
 * - Outbound part id (what send returns): `<uri>|<cid>` of the post that was created, so the next part of a
 *   split reply can be threaded under it without another lookup.
 * - Outbound record key: a TID derived from the outbound row (its creation time, its id) and the part
 *   number, the same on every attempt: the idempotency key of a post (`recordKeyOf`).
 */
import type { Jid } from '../../core/types.js';
import type { SendPart } from '../channel.js';

/** A strong reference to a record: what `reply.root` and `reply.parent` hold. */
export interface PostRef {
  uri: string;
  cid: string;
}

/** The NSID of a post record. */
export const POST_COLLECTION = 'app.bsky.feed.post';

/** The chat JID of a Bluesky account. */
export function blueskyJid(did: string): Jid {
  return `bluesky:${did}`;
}

/** The DID a `bluesky:` JID names, or null when the JID is not one. */
export function didOfJid(jid: Jid): string | null {
  if (!jid.startsWith('bluesky:')) return null;
  const did = jid.slice('bluesky:'.length);
  return did.startsWith('did:') ? did : null;
}

/** `uri|cid`: the platform id of a post gated created. */
export function encodeRef(ref: PostRef): string {
  return `${ref.uri}|${ref.cid}`;
}

/** Reads `uri|cid` or a bare `uri` (cid then undefined). */
export function decodeRef(id: string): { uri: string; cid: string | undefined } {
  const bar = id.indexOf('|');
  return bar < 0
    ? { uri: id, cid: undefined }
    : { uri: id.slice(0, bar), cid: id.slice(bar + 1) || undefined };
}

/** The parts of an `at://` URI, or null when `uri` is not one. */
export function parseAtUri(uri: string): { repo: string; collection: string; rkey: string } | null {
  const m = /^at:\/\/([^/]+)\/([^/]+)\/([^/?#]+)$/.exec(uri);
  return m ? { repo: m[1]!, collection: m[2]!, rkey: m[3]! } : null;
}

/** True when `uri` names a post (something a reply can thread under). */
export function isPostUri(uri: string): boolean {
  return parseAtUri(uri)?.collection === POST_COLLECTION;
}

const TID_ALPHABET = '234567abcdefghijklmnopqrstuvwxyz';

/**
 * The record key of one part of an outbound reply: a TID (the key type posts must use) whose timestamp is
 * the row's creation time in microseconds plus the part number, and whose clock id is the row id modulo
 * 1024. It is the same on every attempt and after a restart, so the post an earlier attempt made is found
 * under it. Two parts collide only if rows 1024 ids apart were stored in the same millisecond.
 */
export function recordKeyOf(part: Pick<SendPart, 'messageId' | 'part' | 'createdAt'>): string {
  const ms = part.createdAt ? Date.parse(part.createdAt) : Number.NaN;
  // Without a creation time the id alone spreads the keys (one millisecond per row).
  const base = Number.isFinite(ms) ? BigInt(ms) : BigInt(part.messageId);
  const micros = base * 1000n + BigInt(part.part);
  return tid(micros, part.messageId % 1024);
}

/** A TID: 53 bits of microseconds and 10 bits of clock id, in base32-sortable, 13 characters. */
export function tid(micros: bigint, clockId: number): string {
  let v = ((micros & ((1n << 53n) - 1n)) << 10n) | BigInt(clockId & 1023);
  let out = '';
  for (let i = 0; i < 13; i += 1) {
    out = TID_ALPHABET[Number(v & 31n)]! + out;
    v >>= 5n;
  }
  return out;
}
