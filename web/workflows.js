// The workflows page (docs/WORKFLOWS.md): the latest runs (GET /api/workflows) and, with `#run=ID`, one run
// followed live (GET /api/workflows/ID every second): each step with where it stands, a waiting gate with its
// code, and every event. Every text from the server is set with textContent (see common.js).
import { el, getJson, localTime, table } from './common.js';

const $ = (id) => document.getElementById(id);
const LIST_MS = 3000;
const RUN_MS = 1000;

function notice(text) {
  $('notice').textContent = text || '';
  $('notice').hidden = !text;
}

const runId = () => /^#run=(\d+)$/.exec(window.location.hash)?.[1];
const state = (s) => el('span', `wf-state ${s}`, s);
const time = (ms) => (ms ? localTime(new Date(ms).toISOString()) : '');

function renderList(runs) {
  table(
    $('runs'),
    [
      ['run', (r) => el('a', '', `#${r.id}`, { href: `#run=${r.id}` })],
      ['workflow', (r) => r.name],
      ['group', (r) => r.group_folder],
      ['chat', (r) => r.chat_jid],
      ['state', (r) => state(r.state)],
      [
        'steps',
        (r) => `${r.done} of ${r.steps} done${r.current.length ? ` · now ${r.current.join(', ')}` : ''}`,
      ],
      ['started', (r) => time(r.created_at)],
      ['note', (r) => r.note ?? ''],
    ],
    runs.map((r) => ({ ...r, __id: r.id })),
    'no workflow runs yet',
  );
}

function renderRun(v) {
  $('run-section').hidden = false;
  $('run-title').textContent = `Run #${v.run.id}: ${v.run.name} in ${v.run.group_folder}`;
  $('run-facts').replaceChildren(
    state(v.run.state),
    ` started by ${v.run.started_by} in ${v.run.chat_jid} `,
    time(v.run.created_at),
    v.run.arguments ? ` · arguments: ${v.run.arguments}` : '',
    v.run.note ? ` · ${v.run.note}` : '',
  );
  table(
    $('run-steps'),
    [
      ['step', (s) => s.name],
      ['kind', (s) => (s.kind === 'gate' ? 'gate' : 'agent')],
      ['needs', (s) => s.needs.join(', ')],
      ['state', (s) => state(s.status)],
      ['attempt', (s) => s.attempt || ''],
      ['', (s) => (s.code ? `/approve ${s.code} · /reject ${s.code} NOTE` : (s.note ?? ''))],
      ['output', (s) => el('span', 'json', s.output ?? '')],
    ],
    v.steps.map((s) => ({ ...s, __id: s.name, __class: `wf-step ${s.status}` })),
    'no steps',
  );
  table(
    $('run-events'),
    [
      ['at', (e) => time(e.at)],
      ['step', (e) => e.step ?? '(run)'],
      ['event', (e) => e.kind],
      ['attempt', (e) => e.attempt || ''],
      ['note', (e) => e.note ?? ''],
    ],
    v.events.map((e) => ({ ...e, __id: e.id })),
    'no events',
  );
}

async function refreshList() {
  try {
    renderList((await getJson('/api/workflows')).runs);
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    notice(err.message);
  }
}

async function refreshRun() {
  const id = runId();
  if (!id) {
    $('run-section').hidden = true;
    return;
  }
  try {
    renderRun(await getJson(`/api/workflows/${id}`));
    notice('');
  } catch (err) {
    notice(err.message);
  }
}

window.addEventListener('hashchange', () => void refreshRun());
void refreshList();
void refreshRun();
setInterval(() => void refreshList(), LIST_MS);
setInterval(() => void refreshRun(), RUN_MS);
