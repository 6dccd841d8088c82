// The tasks page: lists scheduled tasks with their next and last run (GET /api/tasks) and, with the admin
// token, pauses and resumes them. The token lives in this page's memory only and travels as a Bearer header.
import { el, getJson, localTime, table } from './common.js';

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;
let token = '';

function notice(text) {
  $('notice').textContent = text || '';
  $('notice').hidden = !text;
}

const auth = () => (token ? { Authorization: `Bearer ${token}` } : {});

/** "in 4 min" / "3 s ago" next to a local time (the ISO value on hover). */
function when(iso) {
  if (!iso) return '';
  const d = Date.parse(iso) - Date.now();
  const abs = Math.abs(d);
  const span =
    abs < 60_000
      ? `${Math.round(abs / 1000)} s`
      : abs < 3_600_000
        ? `${Math.round(abs / 60_000)} min`
        : `${(abs / 3_600_000).toFixed(1)} h`;
  const out = el('span');
  out.append(localTime(iso), ` (${d >= 0 ? 'in ' + span : span + ' ago'})`);
  return out;
}

async function change(id, verb) {
  try {
    await getJson(`/api/tasks/${id}/${verb}`, { method: 'POST', headers: auth() });
    notice('');
    await refresh();
  } catch (err) {
    notice(`${verb} failed: ${err.message}`);
  }
}

function render(tasks) {
  const cols = [
    ['id', (t) => t.id],
    ['status', (t) => el('span', `task ${t.status}`, t.status)],
    ['group', (t) => (t.topic ? `${t.group_folder} #${t.topic}` : t.group_folder)],
    ['chat', (t) => t.chat_jid],
    ['schedule', (t) => `${t.kind} ${t.spec}`],
    ['next run', (t) => when(t.next_run_at)],
    ['last run', (t) => when(t.last_run_at)],
    ['failures', (t) => t.failures],
    ['text', (t) => t.text],
    ['note', (t) => t.error || (t.created_by === 'cli' ? '' : `added by ${t.created_by}`)],
  ];
  if (token) {
    cols.push([
      '',
      (t) => {
        if (t.status === 'done') return '';
        const verb = t.status === 'active' ? 'pause' : 'resume';
        const b = el('button', '', verb, { type: 'button', 'data-verb': verb });
        b.addEventListener('click', () => void change(t.id, verb));
        return b;
      },
    ]);
  }
  const rows = tasks.map((t) => ({ ...t, __id: t.id, __class: `task-row ${t.status}` }));
  table($('tasks'), cols, rows, 'no tasks');
}

async function refresh() {
  try {
    const { tasks } = await getJson('/api/tasks', { headers: auth() });
    render(tasks);
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    notice(err.message);
  }
}

$('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  token = $('token').value.trim();
  $('token').value = '';
  $('token-state').textContent = token ? 'token set' : '';
  void refresh();
});

void refresh();
setInterval(() => void refresh(), REFRESH_MS);
