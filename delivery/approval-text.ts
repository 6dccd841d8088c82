import type { Channel } from '../channels/channel.js';
import { markdownToMrkdwn, markdownToPlain, telegramHtmlBlocks } from '../core/markdown.js';
import { measure } from '../core/text.js';
import { isBudget, isGate, type ToolApproval } from '../store/tool-approvals.js';

/**
 * The words of a tool approval's question (docs/APPROVALS.md, "What the approver sees"): the real input
 * first, whole, in a code block, up to what the message can hold (beyond it the head and the tail with the
 * count of hidden characters, the whole input going with it as a file or being on the dashboard); then the
 * agent's summary on one line, marked as the agent's words, so no newline or fake `input:` line of the
 * agent's can pass for gated's. Written as Markdown and turned into the channel's dialect here, once.
 */

/** Where the question goes: the channel's dialect and how long one message may be. */
export type QuestionTarget = Pick<Channel, 'limit' | 'limitUnit' | 'textFormat'>;

/** The text of a question, in the target's dialect, and the whole input when it had to be cut. */
export interface QuestionText {
  text: string;
  /** The whole input, when the text shows only its head and tail (sent as a file where possible). */
  whole: string | null;
}

/** Longest summary shown: it is the agent's words, never the thing decided on. */
const SUMMARY_MAX = 300;
/** The least of the input a question shows, however small the platform's messages. */
const MIN_SHOWN = 200;

/** The input as it would run: a shell tool's command as written, a file tool's path, else the JSON. */
export function shownInput(row: Pick<ToolApproval, 'input_json' | 'input_line'>): string {
  let input: unknown;
  try {
    input = JSON.parse(row.input_json);
  } catch {
    return row.input_line;
  }
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    const o = input as Record<string, unknown>;
    const keys = Object.keys(o);
    // The description beside a command is the agent's words too: not part of what runs.
    if (typeof o.command === 'string' && keys.every((k) => k === 'command' || k === 'description'))
      return visible(o.command);
    if (typeof o.file_path === 'string' && keys.length === 1) return visible(o.file_path);
  }
  return visible(JSON.stringify(input, null, 2));
}

/** Control and direction characters written out (`\u{1B}`), so what is shown is what runs. */
function visible(s: string): string {
  return s.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g,
    (c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`,
  );
}

/** The agent's summary on one line, as a code span (inert), clipped; null when it adds nothing. */
export function summaryLine(row: Pick<ToolApproval, 'summary' | 'tool'>, input: string): string | null {
  if (row.summary === null) return null;
  let s = row.summary.replace(/[\s\p{Cc}\p{Cf}]+/gu, ' ').trim();
  // "Bash: …" under a question that already names Bash.
  if (s.startsWith(`${row.tool}: `)) s = s.slice(row.tool.length + 2);
  const flat = input.replace(/\s+/g, ' ').trim();
  if (s === '' || s === flat || s === `${row.tool} ${flat}`) return null;
  if (s.length > SUMMARY_MAX) s = `${s.slice(0, SUMMARY_MAX)}…`;
  // A code span: nothing in it is Markdown, HTML or a link, on any platform.
  const longest = Math.max(0, ...[...s.matchAll(/`+/g)].map((m) => m[0].length));
  const tick = '`'.repeat(longest + 1);
  return `${tick} ${s} ${tick}`;
}

/** A fenced code block that no run of backticks in `code` can close. */
function fenced(code: string): string {
  const longest = Math.max(0, ...[...code.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(Math.max(3, longest + 1));
  return `${fence}\n${code}\n${fence}`;
}

/**
 * Markdown made inert for a place inside a line: what could open emphasis, code, a link, HTML or a table
 * escaped (a line's start, where `#` or `-` would count, is never such a place here).
 */
function inert(s: string): string {
  return s.replace(/[\\`*_{}[\]|<>~&]/g, (c) => `\\${c}`);
}

/** The Markdown of the question, showing `shown` as the input (all of it, or head and tail), then `ending`. */
function questionMarkdown(
  row: ToolApproval,
  shown: string,
  hidden: number,
  summary: string | null,
  ending: string,
): string {
  return [
    isGate(row)
      ? `A workflow waits for your approval before it goes on (${inert(row.tool)}):`
      : isBudget(row)
        ? 'An agent run is over a daily cap and waits for you: go on with one more budget, or stop it?'
        : `The agent wants to run ${inert(row.tool)} with this input, exactly:`,
    fenced(shown),
    hidden > 0
      ? `(${hidden} characters hidden in the middle: the whole input is sent as a file where the chat takes files, and is on the dashboard's approvals page)`
      : null,
    summary !== null ? `The agent's own summary (not checked): ${summary}` : null,
    ending,
  ]
    .filter((l): l is string => l !== null)
    .join('\n\n');
}

/** Markdown in the target's dialect (as delivery's partsFor does for a reply, without splitting). */
export function inDialect(markdown: string, target: QuestionTarget): string {
  switch (target.textFormat ?? 'markdown') {
    case 'telegram-html':
      return telegramHtmlBlocks(markdown).join('\n\n');
    case 'slack-mrkdwn':
      return markdownToMrkdwn(markdown);
    case 'plain':
      return markdownToPlain(markdown);
    default:
      return markdown;
  }
}

/** The commands under a pending question. */
function commands(row: ToolApproval): string {
  if (isBudget(row))
    return `/approve ${row.code} for one more budget (the cap once more, today), /reject ${row.code} \\[note\\] to stop the run.`;
  return `/approve ${row.code} to allow it, /reject ${row.code} \\[note\\] to refuse.`;
}

/**
 * The question for `target`: the whole input when the message can hold it, else as much of its head and
 * tail as fits (the head a little longer), with the count of characters left out.
 */
export function questionText(row: ToolApproval, target: QuestionTarget, limit = target.limit): QuestionText {
  return compose(row, target, limit, commands(row));
}

/**
 * The question's message once decided, in the target's dialect: what was asked (the input as it was
 * shown, the summary), then how it ended instead of the commands. The message is edited into this.
 */
export function decidedQuestionText(row: ToolApproval, target: QuestionTarget, limit = target.limit): string {
  return compose(row, target, limit, `**${inert(decidedText(row))}**`).text;
}

function compose(row: ToolApproval, target: QuestionTarget, limit: number, ending: string): QuestionText {
  // A workflow gate's question is the operator's words from the workflow file, shown as written.
  const input = isGate(row) || isBudget(row) ? visible(row.input_line) : shownInput(row);
  const summary = summaryLine(row, input);
  const size = (md: string) => measure(inDialect(md, target), target.limitUnit);
  const whole = questionMarkdown(row, input, 0, summary, ending);
  if (size(whole) <= limit) return { text: inDialect(whole, target), whole: null };
  const chars = [...input];
  const frame = size(questionMarkdown(row, '\n… 0000000 characters hidden …\n', 1, summary, ending));
  let keep = Math.max(MIN_SHOWN, limit - frame);
  for (;;) {
    const head = Math.ceil(keep * 0.6);
    const tail = keep - head;
    const hidden = chars.length - keep;
    const shown = [
      chars.slice(0, head).join(''),
      `… ${hidden} characters hidden …`,
      chars.slice(chars.length - tail).join(''),
    ].join('\n');
    const md = questionMarkdown(row, shown, hidden, summary, ending);
    if (size(md) <= limit || keep <= MIN_SHOWN) return { text: inDialect(md, target), whole: input };
    keep = Math.max(MIN_SHOWN, Math.floor(keep * 0.85));
  }
}

/** How a question ended, one line: who decided, or why nobody did. Starts `TOOL (CODE): `. */
export function decidedText(row: ToolApproval): string {
  const head = `${row.tool} (${row.code}): `;
  if (row.state === 'approved') return `${head}approved by ${row.decided_by ?? 'someone'}`;
  if (row.state === 'expired') return `${head}not decided in time: denied (no decision)`;
  if (row.state === 'cancelled') return `${head}cancelled, ${row.note ?? 'its turn ended'}: not run`;
  return `${head}rejected by ${row.decided_by ?? 'someone'}${row.note ? `: ${row.note}` : ''}`;
}

/**
 * A question's text as the channel's ApprovalOps take it. Slack's escape `<`, `>` and `&` themselves (so
 * no caller's text can notify a channel): the mrkdwn written here, escaped already, is handed over with
 * those three unescaped, to be escaped exactly once. Other channels take it as it is.
 */
export function opsText(text: string, target: QuestionTarget): string {
  if (target.textFormat !== 'slack-mrkdwn') return text;
  return text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}
