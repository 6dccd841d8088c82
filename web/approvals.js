// The tool approvals page of the dashboard (docs/APPROVALS.md, "Dashboard"): the tool calls waiting for a
// person, with approve and reject (a note goes with a rejection to the agent) for the holder of the admin
// token, and the decided ones with who decided. The token lives in this page's memory only; every text
// from the server is set with textContent (see common.js).
import { adminPage, age, el, getJson, table } from './common.js';

const $ = (id) => document.getElementById(id);
async function decide(code, approve, note) {
  try {
    const r = await getJson(`/api/approvals/${encodeURIComponent(code)}/${approve ? 'approve' : 'reject'}`, {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': 'application/json' },
      body: JSON.stringify(note ? { note } : {}),
    });
    notice(`${r.approval.tool} (${code}) ${r.approval.state}`);
  } catch (err) {
    notice(`not decided: ${err.message}`);
  }
  await refresh(false);
}

/** Approve, and reject with an optional note, for one pending row. */
function actions(a) {
  const span = el('span', 'actions');
  const note = el('input', 'note', null, {
    placeholder: 'note (reject)',
    'aria-label': 'note',
    maxlength: '2000',
  });
  const approve = el('button', 'approve', 'approve', { type: 'button' });
  const reject = el('button', 'danger reject', 'reject', { type: 'button' });
  approve.addEventListener('click', () => void decide(a.code, true));
  reject.addEventListener('click', () => void decide(a.code, false, note.value.trim()));
  span.append(approve, reject, note);
  return span;
}

// The real input first, whole; the agent's summary after it, marked as its words.
const what = (a) => {
  const input = a.input ?? a.input_line;
  return a.summary ? `${input}  · the agent's summary: ${a.summary}` : input;
};

function render(r) {
  const pendingCols = [
    ['code', (a) => el('span', 'code', a.code)],
    ['group', (a) => (a.topic ? `${a.group_folder} #${a.topic}` : a.group_folder)],
    ['chat', (a) => a.chat_jid],
    ['tool', (a) => a.tool],
    ['input', (a) => el('span', 'json', what(a))],
    ['approvers', (a) => a.approvers],
    ['asked', (a) => `${age(r.now - a.created_at)} ago`],
    ['expires in', (a) => age(Math.max(0, a.expires_at - r.now))],
  ];
  // The inputs of a row would be lost on each refresh while someone types a note: keep the table then.
  const typing = document.activeElement?.classList?.contains('note');
  if (page.hasToken()) pendingCols.push(['', actions]);
  if (!typing)
    table(
      $('pending'),
      pendingCols,
      r.pending.map((a) => ({ ...a, __id: a.code, __class: 'tool-approval pending' })),
      'nothing waits for a decision',
    );
  table(
    $('decided'),
    [
      ['code', (a) => el('span', 'code', a.code)],
      ['group', (a) => (a.topic ? `${a.group_folder} #${a.topic}` : a.group_folder)],
      ['tool', (a) => a.tool],
      ['input', (a) => el('span', 'json', what(a))],
      ['decision', (a) => el('span', `state ${a.state}`, a.state)],
      ['by', (a) => a.decided_by || ''],
      ['note', (a) => a.note || ''],
      ['decided', (a) => (a.decided_at ? `${age(r.now - a.decided_at)} ago` : '')],
      ['used', (a) => (a.used_at ? 'yes' : 'not yet')],
    ],
    r.decided.map((a) => ({ ...a, __id: a.code, __class: `tool-approval ${a.state}` })),
    'nothing decided yet',
  );
}

const page = adminPage({ url: '/api/approvals', render, refreshMs: 2000 });
const { auth, notice } = page;
const refresh = page.refresh;
page.start();
