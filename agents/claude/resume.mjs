// A turn the session already holds (docs/AGENTS.md, "Interrupted turns"): when gated or the agent dies in
// the middle of a turn, gated gives that turn's messages to the next run, but Claude Code's transcript
// already holds the turn's prompt and whatever the turn did before the crash (tool calls and their
// results). Resuming the session and sending the prompt again would show the model the prompt twice (with
// a "No response requested." the CLI puts between them) and run the tools again.
//
// So the agent tags every prompt it sends with a uuid of its own (the SDK keeps it as the transcript
// entry's uuid) and notes which message ids it carried in a small ledger beside the transcripts. A run
// whose first messages include every message of the prompts at the end of the session's transcript
// resumes the session at the last point the turn reached with all its tool calls answered
// (`resumeSessionAt`), and sends only what the transcript lacks: a note to go on and any message that
// arrived since. A message steered into the turn is kept by the CLI as a `queued_command` attachment
// naming the agent's uuid: where the kept part holds it, it is not sent again either. A turn that reached
// no such point is cut off before its prompt and sent again whole.
import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

/** What the model reads when its cut-off turn goes on after its recorded tool results. */
export const CONTINUE_NOTE =
  '<system>The gateway restarted during this turn. What you did above is kept (the tool calls ran and ' +
  'their results are there): do not repeat it. Continue the turn and give your answer.</system>';

/** How many ledgers a run without a session looks through for its messages (newest first). */
const LEDGERS_SEARCHED = 20;

/** The message ids of a line (`messages[].id`), as numbers. */
export function idsOf(messages) {
  return Array.isArray(messages) ? messages.map((m) => m?.id).filter((id) => Number.isInteger(id)) : [];
}

/** The ledger of prompts this agent sent, one file per session: `{uuid, ids}` per line. */
export class Ledger {
  constructor(stateDir) {
    this.dir = join(stateDir, 'sent');
  }

  #file(session) {
    return join(this.dir, `${session}.jsonl`);
  }

  /** Notes that the prompt `uuid` of `session` carried the messages `ids` (nothing for none). */
  record(session, uuid, ids) {
    if (!session || ids.length === 0) return;
    mkdirSync(this.dir, { recursive: true });
    appendFileSync(this.#file(session), `${JSON.stringify({ uuid, ids })}\n`);
  }

  /** uuid → message ids of the prompts sent in `session`. */
  read(session) {
    const sent = new Map();
    let text = '';
    try {
      text = readFileSync(this.#file(session), 'utf8');
    } catch {
      return sent;
    }
    for (const line of text.split('\n')) {
      try {
        const e = JSON.parse(line);
        if (typeof e.uuid === 'string' && Array.isArray(e.ids)) sent.set(e.uuid, e.ids);
      } catch {
        // A line cut by a crash: that prompt is not known.
      }
    }
    return sent;
  }

  /** The sessions whose ledgers were written last, newest first (for a run gated gave no session). */
  recent() {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir)
      .filter((f) => f.endsWith('.jsonl'))
      .map((f) => ({ session: f.slice(0, -'.jsonl'.length), at: statSync(join(this.dir, f)).mtimeMs }))
      .sort((a, b) => b.at - a.at)
      .slice(0, LEDGERS_SEARCHED)
      .map((s) => s.session);
  }
}

/** The transcript file of `session` under the CLI's config dir, or null. */
function transcriptFile(configDir, session) {
  const projects = join(configDir, 'projects');
  if (!existsSync(projects)) return null;
  for (const d of readdirSync(projects)) {
    const f = join(projects, d, `${session}.jsonl`);
    if (existsSync(f)) return f;
  }
  return null;
}

/**
 * The session's conversation as the CLI resumes it: from its newest entry back to the first, through the
 * `parentUuid` links (a resume at an earlier point leaves the abandoned branch in the file). Oldest first.
 */
export function readChain(configDir, session) {
  const file = transcriptFile(configDir, session);
  if (file === null) return [];
  const byUuid = new Map();
  let leaf = null;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof e?.uuid !== 'string' || e.isSidechain === true) continue;
    if (!['user', 'assistant', 'attachment', 'system'].includes(e.type)) continue;
    byUuid.set(e.uuid, e);
    leaf = e;
  }
  const chain = [];
  const seen = new Set();
  for (let e = leaf; e && !seen.has(e.uuid); e = byUuid.get(e.parentUuid)) {
    seen.add(e.uuid);
    chain.push(e);
  }
  return chain.reverse();
}

function blocks(e) {
  const c = e.message?.content;
  return Array.isArray(c) ? c : typeof c === 'string' ? [{ type: 'text', text: c }] : [];
}

/** A prompt: a user entry of text (not a tool result, not one the CLI made itself). */
function isPrompt(e) {
  return e.type === 'user' && e.isMeta !== true && !blocks(e).some((b) => b.type === 'tool_result');
}

/**
 * The turn at the end of `chain` when the run's messages (`ids`) include every message of it, else null.
 * `sent` is the session's ledger. Returns the message ids (`held`) and text (`said`) of the prompts and of
 * the messages steered into the kept part of the turn, the entry
 * to resume at (`resumeAt`), whether the turn goes on after recorded work (`continued`; else it is sent
 * again from its prompt), and what the kept part did: the texts the model wrote (`texts`) and its tool
 * calls with their results (`calls`).
 */
export function heldTurn(chain, sent, ids) {
  const run = new Set(ids);
  let first = -1;
  const held = new Set();
  for (let i = chain.length - 1; i >= 0; i--) {
    if (!isPrompt(chain[i])) continue;
    const theirs = sent.get(chain[i].uuid);
    if (!theirs || !theirs.every((id) => run.has(id))) break;
    for (const id of theirs) held.add(id);
    first = i;
  }
  if (first < 0) return null;
  // The last piece of the turn's work (what the model wrote, a tool's result) after which every tool call
  // so far has its result. Entries the CLI adds by itself (attachments, system lines, an API error or a
  // placeholder it wrote as the model) are not work: a turn that failed on the API is sent again whole.
  const open = new Set();
  let keep = -1;
  for (let i = first + 1; i < chain.length; i++) {
    const e = chain[i];
    const made = e.isApiErrorMessage === true || e.message?.model === '<synthetic>';
    const work = (e.type === 'assistant' && !made) || (e.type === 'user' && !isPrompt(e));
    for (const b of blocks(chain[i])) {
      if (chain[i].type === 'assistant' && b.type === 'tool_use') open.add(b.id);
      if (b.type === 'tool_result') open.delete(b.tool_use_id);
    }
    if (work && open.size === 0) keep = i;
  }
  const promptText = (e) =>
    blocks(e)
      .map((b) => b.text ?? '')
      .join('\n');
  const said = chain.slice(first).filter(isPrompt).map(promptText);
  if (keep >= 0) {
    // A message steered into the turn is kept as a `queued_command` attachment where the CLI folded it in,
    // under the uuid the agent gave it (`source_uuid`): when the kept part holds it, so does the model's
    // context, and it is not sent again.
    for (const e of chain.slice(first + 1, keep + 1)) {
      const steered = steeredPrompt(e, sent);
      if (steered === null) continue;
      for (const id of steered.ids) held.add(id);
      said.push(steered.text);
    }
    return {
      held,
      said: said.join('\n'),
      resumeAt: chain[keep].uuid,
      continued: true,
      ...keptWork(chain.slice(first + 1, keep + 1)),
    };
  }
  // Nothing of the turn is kept: the session goes back to before its prompt, which is sent again. A session
  // that holds nothing else is not resumed at all (a new one starts, as gated asked).
  const parent = chain[first].parentUuid;
  if (typeof parent !== 'string') return null;
  return { held, said: said.join('\n'), resumeAt: parent, continued: false, texts: [], calls: [] };
}

/**
 * A message the agent steered into a turn, as the transcript keeps it (an attachment of type
 * `queued_command` naming the agent's uuid as `source_uuid`): its message ids from the ledger `sent` and its
 * text; null for any other entry, or one the ledger does not know.
 */
function steeredPrompt(e, sent) {
  const a = e.type === 'attachment' ? e.attachment : null;
  if (a?.type !== 'queued_command' || typeof a.source_uuid !== 'string') return null;
  const ids = sent.get(a.source_uuid);
  if (!ids) return null;
  const p = a.prompt;
  const text =
    typeof p === 'string'
      ? p
      : Array.isArray(p)
        ? p.map((b) => (typeof b?.text === 'string' ? b.text : '')).join('\n')
        : '';
  return { ids, text };
}

/** The texts and the answered tool calls of the kept entries of a turn. */
function keptWork(entries) {
  const texts = [];
  const uses = new Map();
  const calls = [];
  for (const e of entries) {
    for (const b of blocks(e)) {
      if (e.type === 'assistant' && b.type === 'text' && typeof b.text === 'string' && b.text.trim() !== '')
        texts.push(b.text.trim());
      if (e.type === 'assistant' && b.type === 'tool_use') uses.set(b.id, b);
      if (b.type === 'tool_result' && uses.has(b.tool_use_id)) {
        const use = uses.get(b.tool_use_id);
        calls.push({ name: use.name, input: use.input ?? {}, failed: b.is_error === true });
      }
    }
  }
  return { texts, calls };
}

/**
 * What a continued turn sends: the note to go on, gated's `<system>` notes the held prompts lack, and the
 * first line's `<message>` elements of messages the transcript does not hold. Null when the prompt cannot
 * be matched to its messages (then the turn is sent again whole).
 */
export function remainingPrompt(first, turn) {
  const prompt = typeof first.prompt === 'string' ? first.prompt : '';
  const elements = prompt.match(/<message [^>]*>[\s\S]*?<\/message>/g) ?? [];
  const messages = Array.isArray(first.messages) ? first.messages : [];
  if (elements.length !== messages.length) return null;
  const notes = (prompt.match(/<system>[\s\S]*?<\/system>/g) ?? []).filter((n) => !turn.said.includes(n));
  const left = elements.filter((_, i) => !turn.held.has(messages[i]?.id));
  const parts = [CONTINUE_NOTE, ...notes];
  if (left.length > 0) parts.push(['<messages>', ...left, '</messages>'].join('\n'));
  return parts.join('\n');
}

/**
 * The held turn of this run, if any: in gated's session `own` when it names one whose transcript exists,
 * else in a session of the ledger (a session's first turn cut off before gated learned its id).
 */
export function findHeld(configDir, ledger, own, ids) {
  if (ids.length === 0) return null;
  const run = new Set(ids);
  for (const session of own ? [own] : ledger.recent()) {
    const sent = ledger.read(session);
    // A transcript is read only when its ledger has a prompt of this run's messages.
    if (![...sent.values()].some((theirs) => theirs.every((id) => run.has(id)))) continue;
    const turn = heldTurn(readChain(configDir, session), sent, ids);
    if (turn) return { session, ...turn };
  }
  return null;
}

function named(id) {
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** A stored session transcript exists for `session` (resuming a missing one fails the whole run). */
export function transcriptExists(configDir, session) {
  return transcriptFile(configDir, session) !== null;
}

/**
 * Which session the run goes on with, from its first line: `session` (its id, known before the CLI
 * starts), `options` for the SDK's query, `held` (the cut-off turn the session holds, or null) and
 * `prompt`, what the first turn sends. A session of gated's own wins; without one, a topic starts as a
 * fork of the group's default session (`forkFrom`: its context, under a new id); else a new session.
 */
export function sessionPlan(configDir, ledger, first, log) {
  const own = named(first.sessionId);
  const ownExists = own !== undefined && transcriptExists(configDir, own);
  if (own && !ownExists) log(`no transcript for session ${own}: starting a new one`);
  const parent = own ? undefined : named(first.forkFrom);
  const fork = parent !== undefined && transcriptExists(configDir, parent);
  if (parent && !fork) log(`no transcript for session ${parent} to fork: starting a new one`);
  const held = findHeld(configDir, ledger, ownExists ? own : undefined, idsOf(first.messages));
  const prompt = held?.continued ? remainingPrompt(first, held) : first.prompt;
  if (held && prompt !== null) {
    log(
      `session ${held.session} holds this turn's messages (${[...held.held].join(', ')}): ` +
        (held.continued ? 'it goes on after its recorded tool results' : 'sent again in its place'),
    );
    return {
      session: held.session,
      options: { resume: held.session, resumeSessionAt: held.resumeAt },
      held,
      prompt,
    };
  }
  if (held) log(`the prompt does not match its messages: the cut-off turn is sent again`);
  if (ownExists) return { session: own, options: { resume: own }, held: null, prompt: first.prompt };
  const session = randomUUID();
  const options = fork ? { resume: parent, forkSession: true, sessionId: session } : { sessionId: session };
  return { session, options, held: null, prompt: first.prompt };
}

/** The file noting that `session` cannot be compacted (turns.mjs): its reason, one line. */
function stuckFile(stateDir, session) {
  return join(stateDir, 'stuck', `${session}.txt`);
}

/** Notes that `session` cannot be compacted any more, and why; its later runs do not ask the model. */
export function markStuck(stateDir, session, reason) {
  if (typeof session !== 'string' || session === '') return;
  mkdirSync(join(stateDir, 'stuck'), { recursive: true });
  writeFileSync(stuckFile(stateDir, session), String(reason).slice(0, 500));
}

/** Why `session` cannot be compacted, when an earlier run found so; else null. */
export function stuckReason(stateDir, session) {
  if (typeof session !== 'string' || session === '') return null;
  try {
    return readFileSync(stuckFile(stateDir, session), 'utf8').trim() || 'compaction failed';
  } catch {
    return null;
  }
}
