// The operator dashboard: three views chosen by the URL's hash: the overview (`#`: charts, routes, lanes,
// runs, and the panels other features register), a chat (`#chat=<jid>`, or `#chats` for the list) and a
// run (`#run=<id>`). The overview polls the read-only JSON endpoints every few seconds. The admin token,
// when typed, lives in this page's memory only (dash-core.js) and is sent as a Bearer header; without it
// the page is read-only.
import { age, el, getJson, localTime, RUN_TIME, runState, runTime, table, tokens, usd } from './common.js';
import { mountCharts } from './charts.js';
import { mountChatView, openChat, refreshChats } from './chat-view.js';
import {
  api,
  auth,
  chatLink,
  getToken,
  notice,
  readError,
  registeredPanels,
  runLink,
  setToken,
} from './dash-core.js';
import { mountRunView, openRun } from './run-view.js';
// Panels that add their own section to the overview.
import './cluster.js';
import './channels.js';
import './usage.js';

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;

function lane(l) {
  return { ...l, __class: `lane ${l.state}` };
}

function renderRoutes(routes) {
  const cols = [
    ['seq', (r) => r.seq],
    ['id', (r) => r.id],
    ['match', (r) => r.match || '(everything)'],
    ['target', (r) => r.target],
    ['impulse', (r) => r.impulse_config || ''],
    ['hits', (r) => el('span', 'hits', r.hits)],
    ['last hit', (r) => localTime(r.last_hit_at)],
    [
      'status',
      (r) =>
        el(
          'span',
          r.valid ? 'ok' : 'bad',
          r.valid ? (r.reason ? `ok: ${r.reason}` : 'ok') : `invalid: ${r.reason}`,
        ),
    ],
  ];
  if (getToken()) {
    cols.push([
      '',
      (r) => {
        const b = el('button', 'danger', 'remove', { type: 'button' });
        b.addEventListener('click', () => void removeRoute(r.id));
        return b;
      },
    ]);
  }
  const rows = routes.map((r) => ({ ...r, __id: r.id, __class: `route ${r.valid ? 'valid' : 'invalid'}` }));
  table($('routes'), cols, rows, 'no routes: web: chats still reach their group directly');
}

async function refresh() {
  try {
    const [routes, lanes, held, groups, outbox, runs, trees] = await Promise.all([
      api('routes'),
      api('lanes'),
      api('held'),
      api('groups'),
      api('outbox'),
      api('runs?limit=30'),
      api('worktrees'),
    ]);
    renderRoutes(routes.routes);
    const laneCols = [
      ['state', (l) => l.state],
      ['group', (l) => l.group],
      ['topic', (l) => l.topic],
      ['chat', (l) => (l.chat_jid ? chatLink(l.chat_jid) : '')],
      ['in state', (l) => age(l.age_ms)],
      ['agent age', (l) => age(l.agent_age_ms)],
      ['run', (l) => (l.run_id ? runLink(l.run_id) : '')],
    ];
    table(
      $('lanes'),
      laneCols,
      [...lanes.active, ...lanes.waiting].map(lane),
      'no lane is running or waiting',
    );
    table(
      $('held'),
      [
        ['chat', (h) => chatLink(h.chat_jid)],
        ['messages', (h) => h.count],
        ['weight', (h) => h.weight],
        ['oldest', (h) => age(h.age_ms)],
      ],
      held.held,
      'nothing held',
    );
    // A busy mode being chosen is not redrawn under the operator's hand.
    if (!$('groups').contains(document.activeElement))
      table(
        $('groups'),
        [
          ['folder', (g) => g.folder],
          ['name', (g) => g.name || ''],
          // What a message does while the agent works: a choice with the admin token (as `gated groups busy
          // FOLDER MODE`), else its name.
          ['busy', (g) => (getToken() ? busyChoice(g) : g.busy), BUSY_HINT],
          ['added', (g) => localTime(g.added_at)],
        ],
        groups.groups,
      );
    const outCols = [
      ['id', (o) => o.id],
      ['state', (o) => o.delivery],
      ['chat', (o) => chatLink(o.chat_jid)],
      ['tries', (o) => o.delivery_attempts],
      ['error', (o) => o.delivery_error || ''],
      ['text', (o) => o.preview],
    ];
    const out = [...outbox.failed, ...outbox.pending].map((o) => ({ ...o, __class: `out ${o.delivery}` }));
    table($('outbox'), outCols, out, 'every reply delivered');
    // An open run is running or idle as its lane says (one vocabulary: common.js RUN_STATES).
    const laneOf = new Map(lanes.active.map((l) => [l.run_id, l.state]));
    const stateOf = (r) => r.result || (laneOf.get(r.id) === 'idle' ? 'idle' : 'running');
    // What a run did and how long first: on a phone the rest scrolls sideways.
    const runCols = [
      ['id', (r) => runLink(r.id)],
      ['state', (r) => runState(stateOf(r))],
      ['worked', (r) => runTime(r, 'worked'), RUN_TIME.worked],
      ['idle', (r) => runTime(r, 'idle'), RUN_TIME.idle],
      ['group', (r) => r.group_folder],
      ['topic', (r) => r.topic],
      ['chat', (r) => (r.chat_jid ? chatLink(r.chat_jid) : '')],
      ['started', (r) => localTime(r.started_at)],
      ['ended', (r) => localTime(r.ended_at)],
      ['msgs', (r) => r.messages],
      ['replies', (r) => r.replies],
      ['tokens in/out', (r) => tokens(r)],
      ['cost', (r) => (r.cost_usd === null ? '' : usd(r.cost_usd))],
      ['error', (r) => r.error || ''],
    ];
    table(
      $('runs'),
      runCols,
      runs.runs.map((r) => ({ ...r, __class: `run ${stateOf(r)}` })),
      'no runs yet',
    );
    table(
      $('worktrees'),
      [
        ['group', (w) => w.group_folder],
        ['topic', (w) => (w.topic === '' ? '(default)' : `#${w.topic}`)],
        ['branch', (w) => w.branch],
        ['last run', (w) => localTime(w.last_run_at)],
        ['ahead', (w) => (w.ahead === null ? '?' : w.ahead)],
        ['behind', (w) => (w.behind === null ? '?' : `${w.behind} (${w.base})`)],
        ['removal', (w) => (w.remove_reason ? `asked: ${w.remove_reason}` : '')],
      ],
      trees.worktrees,
      trees.repos.length === 0 ? 'no group is bound to a repository (gated groups repo)' : 'no worktree yet',
    );
    await refreshPanels();
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
    notice('');
  } catch (err) {
    notice(`refresh failed: ${readError(err)}`);
  }
}

/** Builds a section for each registered panel (once), then lets each fill its own. */
async function refreshPanels() {
  for (const p of registeredPanels()) {
    let body = document.getElementById(`panel-${p.id}`);
    if (!body) {
      const section = el('section', p.wide ? 'wide' : '');
      const h = el('h2', '', p.title);
      if (p.hint) h.append(' ', el('small', '', p.hint));
      body = el('div', 'panel', undefined, { id: `panel-${p.id}` });
      section.append(h, body);
      $('view-overview').append(section);
    }
    try {
      await p.refresh(body);
    } catch (err) {
      body.replaceChildren(el('p', 'bad', readError(err)));
    }
  }
}

/** Shows the view the hash names and loads it. */
function route() {
  const hash = decodeURIComponent(window.location.hash.slice(1));
  let view = 'overview';
  if (hash.startsWith('chat=')) {
    view = 'chat';
    void openChat(hash.slice('chat='.length));
  } else if (hash === 'chats') {
    view = 'chat';
    void refreshChats();
  } else if (/^run=\d+$/.test(hash)) {
    view = 'run';
    void openRun(Number(hash.slice('run='.length)));
  }
  for (const v of ['overview', 'chat', 'run']) $(`view-${v}`).hidden = v !== view;
  document.body.dataset.view = view;
  if (view === 'overview') void refresh().then(() => hash === 'runs' && $('runs-section').scrollIntoView());
}

const BUSY_MODES = ['queue', 'steer', 'interrupt'];
const BUSY_HINT =
  'What a message does while the agent works on a turn: queue waits for the next turn, steer shows it to ' +
  'the model inside the turn, interrupt stops the turn first';

/** The busy mode of group `g` as a choice that sets it (admin token). */
function busyChoice(g) {
  const select = el('select', 'busy', undefined, { 'aria-label': `busy mode of ${g.folder}` });
  select.dataset.folder = g.folder;
  for (const mode of BUSY_MODES) {
    const option = el('option', '', mode, { value: mode });
    option.selected = mode === g.busy;
    select.append(option);
  }
  select.addEventListener('change', () => void setBusy(g.folder, select));
  return select;
}

async function setBusy(folder, select) {
  try {
    await getJson('/api/groups/busy', {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ folder, mode: select.value }),
    });
    notice('');
  } catch (err) {
    notice(`busy mode not set: ${readError(err)}`);
  }
  select.blur();
  await refresh();
}

async function removeRoute(id) {
  try {
    await getJson(`/api/routes/${id}`, { method: 'DELETE', headers: auth() });
    await refresh();
  } catch (err) {
    notice(`not removed: ${err.message}`);
  }
}

async function explain(form) {
  const params = new URLSearchParams();
  for (const [k, v] of new window.FormData(form)) if (String(v).trim()) params.set(k, String(v).trim());
  try {
    const r = await api(`explain?${params}`);
    const out = $('explain-out');
    table(
      out,
      [
        ['seq', (l) => l.seq],
        ['id', (l) => l.id],
        ['match', (l) => l.match || '(everything)'],
        ['target', (l) => l.target],
        ['verdict', (l) => el('span', `verdict ${l.verdict}`, l.verdict)],
        ['why', (l) => l.detail],
      ],
      r.lines.map((l) => ({ ...l, __class: `explain ${l.verdict}` })),
      'no routes',
    );
    out.prepend(el('p', 'outcome', `target: ${r.target ?? 'none'}`));
  } catch (err) {
    $('explain-out').replaceChildren(el('p', 'bad', err.message));
  }
}

async function addRoute(form) {
  const body = Object.fromEntries(new window.FormData(form));
  try {
    const added = await getJson('/api/routes', {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    form.reset();
    notice(added.warning ? `route ${added.id} added, but ${added.warning}` : '');
    await refresh();
  } catch (err) {
    notice(`not added: ${err.message}`);
  }
}

$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setToken($('token').value.trim());
  $('token').value = '';
  $('token-state').textContent = getToken() ? 'token set (this page only)' : '';
  $('add-route').hidden = !getToken();
  if (document.body.dataset.view === 'overview') void refresh();
});
$('explain').addEventListener('submit', (e) => {
  e.preventDefault();
  void explain(e.target);
});
$('add-route').addEventListener('submit', (e) => {
  e.preventDefault();
  void addRoute(e.target);
});

mountCharts($('history'));
mountChatView();
mountRunView();
window.addEventListener('hashchange', route);
route();
window.setInterval(() => {
  if (document.body.dataset.view === 'overview') void refresh();
}, REFRESH_MS);
