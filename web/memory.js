// The memory page: a group's remembered facts (GET /api/memory?group=G), searched by words (&q=…), with
// where each came from; with the admin token, a fact is deleted (POST /api/memory/:id/delete, audited as
// `dashboard`). The token lives in this page's memory only and travels as a Bearer header.
import { el, getJson, localTime, table } from './common.js';

const $ = (id) => document.getElementById(id);
let token = '';

function notice(text) {
  $('notice').textContent = text || '';
  $('notice').hidden = !text;
}

const auth = () => (token ? { Authorization: `Bearer ${token}` } : {});

/** Where a fact came from: the senders of its turn with their roles, or who added it. */
function source(p) {
  if (p && Array.isArray(p.senders) && p.senders.length > 0) {
    const who = p.senders.map((s) => `${s.sender} (${s.role})`).join(', ');
    return p.run ? `${who}, run ${p.run}${p.turn ? ` turn ${p.turn}` : ''}` : who;
  }
  return (p && p.by) || '';
}

async function forget(id) {
  try {
    await getJson(`/api/memory/${id}/delete`, { method: 'POST', headers: auth() });
    notice('');
    await refresh();
  } catch (err) {
    notice(`delete failed: ${err.message}`);
  }
}

function render(facts) {
  const cols = [
    ['id', (f) => f.id],
    ['scope', (f) => el('span', f.scope === 'group' ? 'scope group' : 'scope sender', f.scope)],
    ['fact', (f) => f.text],
    ['from', (f) => source(f.provenance), 'the turn and senders (with their roles) that led to it'],
    ['updated', (f) => localTime(f.updated_at)],
    ['by', (f) => f.actor, 'who last changed it'],
  ];
  if (token) {
    cols.push([
      '',
      (f) => {
        const b = el('button', '', 'delete', { type: 'button', 'data-fact': f.id });
        b.addEventListener('click', () => void forget(f.id));
        return b;
      },
    ]);
  }
  const rows = facts.map((f) => ({ ...f, __id: f.id, __class: 'fact-row' }));
  table($('facts'), cols, rows, 'nothing remembered');
}

async function refresh() {
  const group = $('group').value;
  const q = $('query').value.trim();
  try {
    const params = new URLSearchParams(group ? { group, ...(q ? { q } : {}) } : {});
    const { groups, facts } = await getJson(`/api/memory?${params}`, { headers: auth() });
    if ($('group').options.length !== groups.length) {
      const was = $('group').value;
      $('group').replaceChildren(...groups.map((g) => el('option', '', g, { value: g })));
      if (groups.includes(was)) $('group').value = was;
      if (!group && groups.length > 0) return refresh();
    }
    render(facts);
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    notice(err.message);
  }
}

$('memory-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void refresh();
});
$('group').addEventListener('change', () => void refresh());

$('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  token = $('token').value.trim();
  $('token').value = '';
  $('token-state').textContent = token ? 'token set' : '';
  void refresh();
});

void refresh();
