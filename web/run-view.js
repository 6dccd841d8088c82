// The run view: one session_log row with what it served (its messages and the replies it wrote), its
// timings, how it ended, the tail of the agent's stderr and any usage the agent reported; with the admin
// token, a live run can be stopped.
import { age, el, localTime, runState } from './common.js';
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
    fact(
      dl,
      'duration',
      v.timings.duration_ms === null ? 'still open' : `${age(v.timings.duration_ms)} (agent start → exit)`,
    );
    fact(dl, 'first reply after', v.timings.first_reply_ms === null ? '' : age(v.timings.first_reply_ms));
    const waits = v.timings.queue_ms.filter((q) => q.ms !== null).map((q) => q.ms);
    fact(dl, 'longest wait in queue', waits.length ? age(Math.max(...waits)) : '');
    for (const [k, val] of Object.entries(r)) {
      if (!HEAD.includes(k) && k !== 'id' && k !== 'stderr_tail' && val !== null)
        fact(dl, k, typeof val === 'object' ? JSON.stringify(val) : val);
    }
    $('run-facts').replaceChildren(dl);
    $('run-facts').dataset.result = r.result || 'running';
    $('run-messages').replaceChildren(...v.messages.map(messageItem));
    $('run-messages').dataset.count = String(v.messages.length);
    $('run-stderr').textContent = r.stderr_tail || '(no stderr)';
    $('run-stop').hidden = !getToken() || r.result !== null;
  } catch (err) {
    $('run-facts').replaceChildren(el('p', 'bad', readError(err)));
    $('run-messages').replaceChildren();
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
