/**
 * How Bluesky identities map onto gated's vocabulary.
 *
 * - Chat JID: `bluesky:<did>`, one chat per author (`bluesky:did:plc:abc…`): everything a user does to the
 *   bot (mentions, replies, quotes, follows, likes) lands in the same chat.
 * - Inbound platform_msg_id: the notification's record URI (`at://did/app.bsky.feed.post/rkey` for a post),
 *   which is what the (chat_jid, platform_msg_id) dedup keys on.
 * - Outbound part id (what send returns): `<uri>|<cid>` of the post that was created, so the next part of a
 *   split reply can be threaded under it without another lookup.
 */
import type { Jid } from '../../core/types.js';

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
