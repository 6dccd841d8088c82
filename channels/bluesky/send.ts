import { PLATFORMS } from '../../core/platforms.js';
import { AppBskyFeedPost, RichText, type AtpAgent } from '@atproto/api';
import { DeliveryError } from '../../core/errors.js';
import type { SendPart } from '../channel.js';
import { graphemeLength } from '../../core/text.js';
import { toDeliveryError } from './errors.js';
import {
  POST_COLLECTION,
  decodeRef,
  recordKeyOf,
  didOfJid,
  encodeRef,
  isPostUri,
  parseAtUri,
  type PostRef,
} from './refs.js';
import type { BlueskySession } from './session.js';

/** Bluesky's post length limit, in graphemes. */
export const POST_LIMIT = PLATFORMS.bluesky.limit;

/** Roots remembered for posts gated made, so the next part of a chain needs no lookup. */
const ROOT_CACHE_SIZE = 1000;

/**
 * Posts the parts of outbound replies. A part answering a post becomes a reply under it with the thread's
 * root; each later part of a split reply is threaded under the part before it (SendPart.previousPartId);
 * a part with nothing to answer (a reply to a follow, a gateway notice) becomes a new post that opens with
 * a mention of the user, so it still reaches their notifications. Mentions and links become facets.
 *
 * Each part is created under a record key derived from its outbound row and part number (refs.ts
 * `recordKeyOf`), so a retry after a lost answer or a crash finds the post it made instead of posting twice.
 */
export class ReplyPoster {
  private readonly roots = new Map<string, PostRef>();

  constructor(private readonly session: BlueskySession) {}

  /** Sends one part (with an embed, for images); returns `uri|cid` of the new post. Throws DeliveryError. */
  async send(part: SendPart, embed?: Record<string, unknown>): Promise<string> {
    const did = didOfJid(part.chatJid);
    if (!did) throw new DeliveryError('permanent', `bluesky: '${part.chatJid}' is not a bluesky:<did> chat`);
    try {
      return await this.session.call(async (agent) => {
        const reply = await this.replyRefs(part);
        const text = reply ? part.text : await this.withMention(did, part.text);
        const rt = new RichText({ text });
        await rt.detectFacets(agent);
        const record: AppBskyFeedPost.Record = {
          $type: POST_COLLECTION,
          text: rt.text,
          createdAt: new Date().toISOString(),
        };
        if (rt.facets?.length) record.facets = rt.facets;
        if (reply) record.reply = reply;
        if (embed) record.embed = embed as AppBskyFeedPost.Record['embed'];
        const made = await this.create(agent, recordKeyOf(part), record);
        this.remember(made.uri, reply?.root ?? { uri: made.uri, cid: made.cid });
        return encodeRef({ uri: made.uri, cid: made.cid });
      });
    } catch (err) {
      throw toDeliveryError(err);
    }
  }

  /**
   * Creates the post under its deterministic record key. When the call fails in any way, the key is looked
   * up: a post already there with the same text is the one an earlier attempt made (the PDS accepted it but
   * the answer was lost, or gated died before recording it), and it is returned instead of posting again.
   * A post with other text under the key (a reset database reusing ids) is left alone: the part is posted
   * under a fresh key.
   */
  private async create(agent: AtpAgent, rkey: string, record: AppBskyFeedPost.Record): Promise<PostRef> {
    const repo = this.session.did;
    try {
      const res = await agent.com.atproto.repo.createRecord({
        repo,
        collection: POST_COLLECTION,
        rkey,
        record: { ...record },
      });
      return { uri: res.data.uri, cid: res.data.cid };
    } catch (err) {
      const found = await agent.com.atproto.repo
        .getRecord({ repo, collection: POST_COLLECTION, rkey })
        .catch(() => undefined);
      if (!found?.data.cid) throw err;
      if ((found.data.value as { text?: unknown }).text === record.text)
        return { uri: found.data.uri, cid: found.data.cid };
      const made = await agent.post(record);
      return { uri: made.uri, cid: made.cid };
    }
  }

  /** The reply refs of a part, or undefined when it answers no post. */
  private async replyRefs(part: SendPart): Promise<{ root: PostRef; parent: PostRef } | undefined> {
    if (part.previousPartId) {
      const prev = decodeRef(part.previousPartId);
      if (prev.cid) {
        const parent = { uri: prev.uri, cid: prev.cid };
        return { root: this.roots.get(prev.uri) ?? (await this.ownRoot(parent)), parent };
      }
    }
    if (part.replyTo && isPostUri(decodeRef(part.replyTo).uri))
      return this.threadOf(decodeRef(part.replyTo).uri);
    return undefined;
  }

  /** Parent and root of a reply to someone's post, read from the AppView. */
  private async threadOf(uri: string): Promise<{ root: PostRef; parent: PostRef }> {
    const res = await this.session.agent.getPosts({ uris: [uri] });
    const post = res.data.posts[0];
    if (!post)
      throw new DeliveryError('permanent', `bluesky: the post to reply to is gone (${uri})`, undefined, 404);
    const parent = { uri: post.uri, cid: post.cid };
    const record = post.record as AppBskyFeedPost.Record;
    return { root: record.reply?.root ?? parent, parent };
  }

  /** The thread root of one of our own posts (after a restart the cache is empty), read from our PDS. */
  private async ownRoot(ref: PostRef): Promise<PostRef> {
    const at = parseAtUri(ref.uri);
    if (!at || at.collection !== POST_COLLECTION) return ref;
    const res = await this.session.agent.com.atproto.repo.getRecord({ ...at });
    const record = res.data.value as AppBskyFeedPost.Record;
    return record.reply?.root ?? ref;
  }

  /** `@handle text` when it fits in one post: a new post reaches the user only through a mention. */
  private async withMention(did: string, text: string): Promise<string> {
    const profile = await this.session.agent.getProfile({ actor: did });
    const withHandle = `@${profile.data.handle} ${text}`;
    return graphemeLength(withHandle) <= POST_LIMIT ? withHandle : text;
  }

  private remember(uri: string, root: PostRef): void {
    if (this.roots.size >= ROOT_CACHE_SIZE) this.roots.delete(this.roots.keys().next().value!);
    this.roots.set(uri, root);
  }
}
