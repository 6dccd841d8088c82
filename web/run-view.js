// The run view: one session_log row with what it served (its messages and the replies it wrote), its
// tool calls as a timeline by turn, its timings, how it ended, the tail of the agent's stderr and any usage
// the agent reported; with the admin token, a live run can be stopped.
import { age, el, localTime, RUN_TIME, runState } from './common.js';
import { adminPost, api, chatLink, getToken, notice, onToken, readError } from './dash-core.js';
import { messageItem } from './messages.js';

const $ = (id) => document.getElementById(id);
// Facts shown in the head in this order; other session_log columns follow as they are.
const HEAD = [
  'group_folder',
  'topic',
  'chat_jid',
  'session_id',
  'started_at',
  'ended_at',
  'result',
  'exit_code',
  'error',
  'messages',
  'replies',
];
// Columns shown in a form of their own (idle_ms as the run's time split), never as they are.
const OWN = new Set(['id', 'stderr_tail', 'idle_ms']);
let current = null;

function fact(dl, name, value) {
  const dt = el('dt', '', name);
  const dd = el('dd');
  dd.dataset.field = name;
  if (value instanceof globalThis.Node) dd.append(value);
  else dd.textContent = value === null || value === undefined || value === '' ? '–' : String(value);
  dl.append(dt, dd);
}

/** A head fact as shown: times in local time, the chat as a link. */
function headValue(k, r) {
  if (k === 'chat_jid' && r.chat_jid) return chatLink(r.chat_jid);
  if (k === 'started_at' || k === 'ended_at') return localTime(r[k]);
  return r[k];
}

/** A fact whose meaning follows its value in smaller type. */
function explained(value, why) {
  const span = el('span', '', value);
  span.append(' ', el('small', 'muted', why));
  return span;
}

/** A run's time to the hundredth of a second below a minute: worked + idle adds up to the lifetime. */
function precise(ms) {
  if (ms < 1000) return `${ms} ms`;
  return ms < 60_000 ? `${(ms / 1000).toFixed(2)} s` : age(ms);
}

/** How the run's time splits: worked, idle, and the two together (its lifetime). */
function timeFacts(dl, t) {
  if (t.duration_ms === null) {
    fact(dl, 'worked', 'still open');
    return;
  }
  if (t.work_ms === null) {
    fact(dl, 'worked', explained('?', 'not recorded (the run ended with a restart of gated)'));
  } else {
    fact(dl, 'worked', explained(precise(t.work_ms), RUN_TIME.worked));
    fact(dl, 'idle', explained(precise(t.idle_ms), RUN_TIME.idle));
  }
  fact(dl, 'lifetime', explained(precise(t.duration_ms), 'agent start → exit: worked + idle'));
}

/** One tool call on the timeline: when (after the run's start), what, what decided it, how it ended. */
function callItem(c) {
  const li = el('li', `call ${c.decision === 'deny' || c.error ? 'bad' : 'ok'}`);
  li.dataset.turn = c.turn === null ? '' : String(c.turn);
  li.dataset.tool = c.tool;
  const when = el('span', 'call-at', `+${precise(c.at_ms)}`);
  const what = el('code', 'call-input', `${c.tool} ${c.input}`);
  const decided = el('span', 'call-decision', `${c.decision ?? 'asking'} (${c.decided_by ?? '?'})`);
  const end =
    c.error !== null
      ? el('span', 'bad', c.error)
      : el(
          'span',
          '',
          c.duration_ms === null ? 'running' : `${precise(c.duration_ms)}, ${c.output_bytes ?? 0} B`,
        );
  li.append(when, ' ', what, ' ', decided, ' ', end);
  if (c.seq !== null) li.append(el('small', '', ` receipt #${c.seq}`));
  return li;
}

/** The tool calls grouped by the turn they belong to, in the order they were asked. */
function timeline(calls) {
  if (calls.length === 0) return [el('p', 'muted', 'no tool calls')];
  const out = [];
  let turn;
  let list;
  for (const c of calls) {
    if (!list || c.turn !== turn) {
      turn = c.turn;
      out.push(el('h3', '', turn === null ? 'outside a turn' : `turn ${turn}`));
      list = el('ol', 'calls');
      out.push(list);
    }
    list.append(callItem(c));
  }
  return out;
}

/** Shows run `id`. */
export async function openRun(id) {
  current = id;
  $('run-title').textContent = `run #${id}`;
  try {
    const v = await api(`run/${id}`);
    const r = v.run;
    const dl = el('dl', 'facts');
    for (const k of HEAD) fact(dl, k, headValue(k, r));
    if (r.result === null) fact(dl, 'state', runState('running'));
    timeFacts(dl, v.timings);
    fact(dl, 'first reply after', v.timings.first_reply_ms === null ? '' : age(v.timings.first_reply_ms));
    const waits = v.timings.queue_ms.filter((q) => q.ms !== null).map((q) => q.ms);
    fact(dl, 'longest wait in queue', waits.length ? age(Math.max(...waits)) : '');
    for (const [k, val] of Object.entries(r)) {
      if (!HEAD.includes(k) && !OWN.has(k) && val !== null)
        fact(dl, k, typeof val === 'object' ? JSON.stringify(val) : val);
    }
    $('run-facts').replaceChildren(dl);
    $('run-facts').dataset.result = r.result || 'running';
    $('run-messages').replaceChildren(...v.messages.map(messageItem));
    $('run-messages').dataset.count = String(v.messages.length);
    $('run-calls').replaceChildren(...timeline(v.tool_calls ?? []));
    $('run-calls').dataset.count = String((v.tool_calls ?? []).length);
    $('run-stderr').textContent = r.stderr_tail || '(no stderr)';
    $('run-stop').hidden = !getToken() || r.result !== null;
  } catch (err) {
    $('run-facts').replaceChildren(el('p', 'bad', readError(err)));
    $('run-messages').replaceChildren();
    $('run-calls').replaceChildren();
    $('run-stderr').textContent = '';
  }
}

/** Wires the run view's buttons (once). */
export function mountRunView() {
  $('run-stop').addEventListener('click', async () => {
    try {
      await adminPost(`runs/${current}/stop`);
      notice(`run #${current} stopped`);
    } catch (err) {
      notice(`stop failed: ${err.message}`);
    }
    await openRun(current);
  });
  onToken(() => current !== null && void openRun(current));
}
