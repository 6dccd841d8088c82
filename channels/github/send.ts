import type { Octokit } from '@octokit/rest';
import { coerceError, DeliveryError } from '../../core/errors.js';
import type { Jid } from '../../core/types.js';
import type { DraftOps, SendPart } from '../channel.js';
import { GithubAppRefused } from './app-auth.js';
import { issueOf, type GithubSelf } from './map.js';

/** A REST call that has not answered after this long is aborted and retried by delivery. */
const CALL_TIMEOUT_MS = 15_000;

/** How far before the row's creation a marked comment is looked for (clock skew between gated and GitHub). */
const SKEW_MS = 10 * 60_000;

/**
 * The key of one part: row id, part and the row's creation time in base 36. It goes into the comment as
 * an HTML comment (invisible on GitHub), which is what makes a retried send idempotent.
 */
export function partKey(part: Pick<SendPart, 'messageId' | 'part' | 'createdAt'>): string {
  const ms = part.createdAt ? Date.parse(part.createdAt) : Number.NaN;
  const time = Number.isFinite(ms) ? `.${ms.toString(36)}` : '';
  return `${part.messageId.toString(36)}.${part.part.toString(36)}${time}`;
}

const marker = (key: string) => `<!-- gated:${key}`;

/**
 * The invisible end of a part's body: its key and, on the first part of an answer, the comment it answers
 * (an issue comment cannot be a reply on GitHub; the id keeps the link for tools and for the reader of the
 * source).
 */
function trailer(key: string, replyTo: string | null): string {
  return `${marker(key)}${replyTo && /^\d+$/.test(replyTo) ? ` re:${replyTo}` : ''} -->`;
}

/**
 * The GitHub send path: one issue comment per part. GitHub has no idempotency key for comments, so each
 * part carries its key as an invisible marker, and a send first looks for the bot's comment with that
 * marker among the issue's comments since the row was written: a part retried after a lost answer, or
 * after gated was killed between GitHub's accepting it and delivery's recording it, is found and not posted
 * again. One extra read per part buys that.
 */
export async function sendGithubPart(octokit: Octokit, self: GithubSelf, part: SendPart): Promise<string> {
  const ref = issueOf(part.chatJid);
  const key = partKey(part);
  const request = { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) };
  try {
    if (part.createdAt) {
      const since = new Date(Date.parse(part.createdAt) - SKEW_MS).toISOString();
      const found = await findMarked(octokit, self, { ...ref, since }, key);
      if (found) return found;
    }
    const res = await octokit.rest.issues.createComment({
      owner: ref.owner,
      repo: ref.repo,
      issue_number: ref.number,
      body: `${part.text}\n\n${trailer(key, part.part === 0 ? part.replyTo : null)}`,
      request,
    });
    return String(res.data.id);
  } catch (err) {
    throw toDeliveryError(err);
  }
}

async function findMarked(
  octokit: Octokit,
  self: GithubSelf,
  where: { owner: string; repo: string; number: number; since: string },
  key: string,
): Promise<string | undefined> {
  const pages = octokit.paginate.iterator(octokit.rest.issues.listComments, {
    owner: where.owner,
    repo: where.repo,
    issue_number: where.number,
    since: where.since,
    per_page: 100,
    request: { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) },
  });
  // The space after the key ends it: part 1 never matches part 10.
  const want = `\n\n${marker(key)} `;
  for await (const page of pages) {
    const hit = page.data.find((c) => c.user?.id === self.id && (c.body ?? '').includes(want));
    if (hit) return String(hit.id);
  }
  return undefined;
}

/**
 * GitHub drafts: one comment created, edited in place (PATCH) for every new text and for the final answer,
 * deleted when a long answer replaces it by its parts (a comment already gone counts as deleted).
 */
export function githubDrafts(octokit: Octokit): DraftOps {
  return {
    async open(chatJid, text) {
      const ref = issueOf(chatJid);
      try {
        const res = await octokit.rest.issues.createComment({
          owner: ref.owner,
          repo: ref.repo,
          issue_number: ref.number,
          body: text,
          request: { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) },
        });
        return String(res.data.id);
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async edit(chatJid, id, text) {
      const ref = issueOf(chatJid);
      try {
        await octokit.rest.issues.updateComment({
          owner: ref.owner,
          repo: ref.repo,
          comment_id: Number(id),
          body: text,
          request: { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) },
        });
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async remove(chatJid, id) {
      const ref = issueOf(chatJid);
      try {
        await octokit.rest.issues.deleteComment({ owner: ref.owner, repo: ref.repo, comment_id: Number(id) });
      } catch (err) {
        if (statusOf(err) === 404) return;
        throw toDeliveryError(err);
      }
    },
  };
}

// The reactions GitHub has, by the emoji or name an agent may use.
const REACTIONS: Readonly<Record<string, string>> = {
  '👍': '+1',
  '+1': '+1',
  thumbsup: '+1',
  '👎': '-1',
  '-1': '-1',
  thumbsdown: '-1',
  '😄': 'laugh',
  laugh: 'laugh',
  '😕': 'confused',
  confused: 'confused',
  '❤️': 'heart',
  '❤': 'heart',
  heart: 'heart',
  '🎉': 'hooray',
  hooray: 'hooray',
  '🚀': 'rocket',
  rocket: 'rocket',
  '👀': 'eyes',
  eyes: 'eyes',
};

/** Puts one of GitHub's eight reactions on a comment (`messageId` is the comment id). */
export async function reactGithub(octokit: Octokit, chatJid: Jid, messageId: string, emoji: string) {
  const ref = issueOf(chatJid);
  const content = REACTIONS[emoji.replace(/^:|:$/g, '')];
  if (!content) throw new DeliveryError('permanent', `github has no reaction ${emoji}`);
  if (!/^\d+$/.test(messageId)) throw new DeliveryError('permanent', `not a github comment id: ${messageId}`);
  try {
    await octokit.rest.reactions.createForIssueComment({
      owner: ref.owner,
      repo: ref.repo,
      comment_id: Number(messageId),
      content: content as '+1',
    });
  } catch (err) {
    throw toDeliveryError(err);
  }
}

function statusOf(err: unknown): number | undefined {
  const s = (err as { status?: unknown } | null)?.status;
  return typeof s === 'number' ? s : undefined;
}

/**
 * Sorts a failed REST call: 429, and 403 with `Retry-After` (a secondary rate limit), wait that long; 403
 * with `x-ratelimit-remaining: 0` waits until `x-ratelimit-reset`; 5xx, network errors, 401 (the
 * operator's token) and an App's refused token exchange are transient; other 4xx (403 forbidden, 404, 422
 * validation) are permanent.
 */
export function toDeliveryError(err: unknown, now: number = Date.now()): DeliveryError {
  if (err instanceof DeliveryError) return err;
  // No installation token (the App's key or installation refused): the operator's to fix, the row waits.
  if (err instanceof GithubAppRefused)
    return new DeliveryError('transient', err.message, undefined, err.status);
  const status = statusOf(err);
  if (status === undefined) return new DeliveryError('transient', coerceError(err).message);
  const headers = ((err as { response?: { headers?: Record<string, string | undefined> } }).response
    ?.headers ?? {}) as Record<string, string | undefined>;
  const message = `github: ${status} ${coerceError(err).message.split('\n')[0]!.slice(0, 200)}`;
  const retryAfter = Number(headers['retry-after']);
  if (status === 429 || (status === 403 && Number.isFinite(retryAfter))) {
    const wait = Number.isFinite(retryAfter) ? retryAfter * 1000 : 60_000;
    return new DeliveryError('rate_limited', message, wait, status);
  }
  if (status === 403 && headers['x-ratelimit-remaining'] === '0') {
    const reset = Number(headers['x-ratelimit-reset']) * 1000;
    const wait = Number.isFinite(reset) ? Math.max(reset - now, 1000) : 60_000;
    return new DeliveryError('rate_limited', message, wait, status);
  }
  if (status >= 500 || status === 401) return new DeliveryError('transient', message, undefined, status);
  return new DeliveryError('permanent', message, undefined, status);
}
