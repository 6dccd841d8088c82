import { DeliveryError } from '../../core/errors.js';
import { parseJid, type Jid, type NewInbound } from '../../core/types.js';

/** An issue or pull request: the chat a comment belongs to. */
export interface IssueRef {
  owner: string;
  repo: string;
  number: number;
}

/** The JID of an issue or pull request: `github:<owner>/<repo>#<number>`. */
export function githubJid(ref: IssueRef): Jid {
  return `github:${ref.owner}/${ref.repo}#${ref.number}`;
}

// GitHub's own rules: owners are letters, digits and single hyphens; repository names add `.` and `_`.
const JID = /^([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))\/([A-Za-z0-9._-]{1,100})#([1-9]\d{0,9})$/;

/** The issue of a `github:` JID; anything else is a permanent delivery error. */
export function issueOf(chatJid: Jid): IssueRef {
  const { platform, room } = parseJid(chatJid);
  const m = platform === 'github' ? JID.exec(room) : null;
  if (!m) throw new DeliveryError('permanent', `not a github issue: ${chatJid}`);
  return { owner: m[1]!, repo: m[2]!, number: Number(m[3]) };
}

/** Who the bot is on GitHub: its own comments are never stored (no reply loops). */
export interface GithubSelf {
  login: string;
  id: number;
}

/** The fields of an `issue_comment` or `pull_request_review_comment` delivery gated reads. */
export interface CommentPayload {
  action?: string;
  comment?: {
    id: number;
    body?: string | null;
    user?: { login: string; id: number; type?: string } | null;
    created_at?: string;
    /** The commenter's standing in the repository: OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, … */
    author_association?: string;
  };
  issue?: { number: number; pull_request?: unknown };
  pull_request?: { number: number };
  repository?: { name: string; owner: { login: string }; clone_url?: string };
}

/**
 * The session topic of an issue or pull request: `issue-N` or `pr-N`, so each is a session of its own and,
 * in a group bound to the repository, a worktree on a branch of that name (docs/WORKTREES.md).
 */
export function issueTopic(number: number, pullRequest: boolean): string {
  return `${pullRequest ? 'pr' : 'issue'}-${number}`;
}

/** The fields of an `issues.closed` or `pull_request.closed` delivery gated reads. */
export interface ClosePayload {
  action?: string;
  issue?: { number: number; pull_request?: unknown; closed_at?: string | null };
  pull_request?: { number: number; merged?: boolean; closed_at?: string | null };
  repository?: { name: string; owner: { login: string } };
  sender?: { login: string; id: number };
}

/**
 * An issue or pull request closed, as an inbound row of verb `close` in its topic (the gateway removes
 * the topic's worktree, docs/WORKTREES.md; no agent reads it); null for any other action. Its
 * platform_msg_id names the close, so a redelivery is stored once and a reopened, closed again issue twice.
 */
export function closeToInbound(p: ClosePayload): NewInbound | null {
  const pr = p.pull_request;
  const item = pr ?? p.issue;
  if (p.action !== 'closed' || !item || !p.repository) return null;
  const isPr = pr !== undefined || p.issue?.pull_request !== undefined;
  const ref = { owner: p.repository.owner.login, repo: p.repository.name, number: item.number };
  const what = isPr
    ? `pull request #${item.number} ${pr?.merged ? 'merged' : 'closed'}`
    : `issue #${item.number} closed`;
  return {
    chat_jid: githubJid(ref),
    sender: String(p.sender?.id ?? 0),
    sender_name: p.sender?.login ?? 'github',
    verb: 'close',
    content: what,
    topic: issueTopic(item.number, isPr),
    platform_msg_id: `close-${item.number}-${item.closed_at ?? ''}`,
    reply_to: null,
  };
}

/** A comment that is a decision: `/approve CODE` or `/reject CODE …` as its first words. */
const DECISION = /^\s*\/(approve|reject)\s+\S/i;

/**
 * A new comment that mentions the bot as an inbound row, or null for anything else (edits, deletions,
 * comments that do not mention it, the bot's own comments and other bots'). A decision (`/approve CODE`,
 * `/reject CODE`) needs no mention on a thread where `awaitsDecision` says gated asked something. The row's
 * `platform_msg_id` is the comment id: GitHub keeps it across redeliveries, and two hooks that deliver one
 * comment under two delivery ids still store it once. A leading `@bot` is removed, so `@bot /ping` is a
 * command. The commenter's author_association goes with the row (access makes OWNER, MEMBER and
 * COLLABORATOR members, docs/ACCESS.md).
 */
export function commentToInbound(
  p: CommentPayload,
  self: GithubSelf,
  awaitsDecision: (chatJid: Jid) => boolean = () => false,
): NewInbound | null {
  const c = p.comment;
  const number = p.issue?.number ?? p.pull_request?.number;
  if (p.action !== 'created' || !c || !c.user || !p.repository || number === undefined) return null;
  if (c.user.id === self.id || c.user.type === 'Bot') return null;
  const body = c.body ?? '';
  const ref = { owner: p.repository.owner.login, repo: p.repository.name, number };
  const tag = new RegExp(`(^|[^\\w/-])@${escapeRegExp(self.login)}(?![\\w-])`, 'i');
  const tagged = tag.test(body);
  if (!tagged && !(DECISION.test(body) && awaitsDecision(githubJid(ref)))) return null;
  const lead = new RegExp(`^\\s*@${escapeRegExp(self.login)}(?![\\w-])[\\s,:]*`, 'i');
  const stripped = body.replace(lead, '');
  return {
    chat_jid: githubJid(ref),
    sender: String(c.user.id),
    sender_name: c.user.login,
    verb: tagged ? 'mention' : 'message',
    content: stripped === '' ? body : stripped,
    topic: issueTopic(number, p.pull_request !== undefined || p.issue?.pull_request != null),
    platform_msg_id: String(c.id),
    reply_to: null,
    ...(c.author_association ? { platform_role: c.author_association } : {}),
    ...(c.created_at ? { timestamp: new Date(c.created_at).toISOString() } : {}),
  };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
