// The operator dashboard: polls the read-only JSON endpoints every few seconds and renders them. The admin
// token, when typed, lives in this page's memory only (never in storage, a URL or the page source) and is
// sent as a Bearer header; without it the page is read-only.
import { age, el, getJson, table } from './common.js';

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;
let token = '';

function notice(text) {
  $('notice').textContent = text || '';
  $('notice').hidden = !text;
}

function auth() {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

const api = (path) => getJson(`/api/dashboard/${path}`, { headers: auth() });

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
    ['last hit', (r) => r.last_hit_at || ''],
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
  if (token) {
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
    const [routes, lanes, held, groups, outbox, runs] = await Promise.all([
      api('routes'),
      api('lanes'),
      api('held'),
      api('groups'),
      api('outbox'),
      api('runs?limit=30'),
    ]);
    renderRoutes(routes.routes);
    const laneCols = [
      ['state', (l) => l.state],
      ['group', (l) => l.group],
      ['topic', (l) => l.topic],
      ['chat', (l) => l.chat_jid || ''],
      ['in state', (l) => age(l.age_ms)],
      ['agent age', (l) => age(l.agent_age_ms)],
      ['run', (l) => l.run_id ?? ''],
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
        ['chat', (h) => h.chat_jid],
        ['messages', (h) => h.count],
        ['weight', (h) => h.weight],
        ['oldest', (h) => age(h.age_ms)],
      ],
      held.held,
      'nothing held',
    );
    table(
      $('groups'),
      [
        ['folder', (g) => g.folder],
        ['name', (g) => g.name || ''],
        ['added', (g) => g.added_at],
      ],
      groups.groups,
    );
    const outCols = [
      ['id', (o) => o.id],
      ['state', (o) => o.delivery],
      ['chat', (o) => o.chat_jid],
      ['tries', (o) => o.delivery_attempts],
      ['error', (o) => o.delivery_error || ''],
      ['text', (o) => o.preview],
    ];
    const out = [...outbox.failed, ...outbox.pending].map((o) => ({ ...o, __class: `out ${o.delivery}` }));
    table($('outbox'), outCols, out, 'every reply delivered');
    const runCols = [
      ['id', (r) => r.id],
      ['group', (r) => r.group_folder],
      ['topic', (r) => r.topic],
      ['chat', (r) => r.chat_jid || ''],
      ['started', (r) => r.started_at],
      ['ended', (r) => r.ended_at || 'running'],
      ['result', (r) => r.result || ''],
      ['msgs', (r) => r.messages],
      ['replies', (r) => r.replies],
      ['error', (r) => r.error || ''],
    ];
    table(
      $('runs'),
      runCols,
      runs.runs.map((r) => ({ ...r, __class: `run ${r.result || 'running'}` })),
      'no runs yet',
    );
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
    notice('');
  } catch (err) {
    notice(
      err.status === 401 ? `${err.message}. Enter the admin token above.` : `refresh failed: ${err.message}`,
    );
  }
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
    await getJson('/api/routes', {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    form.reset();
    notice('');
    await refresh();
  } catch (err) {
    notice(`not added: ${err.message}`);
  }
}

$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $('token').value.trim();
  $('token').value = '';
  $('token-state').textContent = token ? 'token set (this page only)' : '';
  $('add-route').hidden = !token;
  void refresh();
});
$('explain').addEventListener('submit', (e) => {
  e.preventDefault();
  void explain(e.target);
});
$('add-route').addEventListener('submit', (e) => {
  e.preventDefault();
  void addRoute(e.target);
});

void refresh();
window.setInterval(() => void refresh(), REFRESH_MS);
