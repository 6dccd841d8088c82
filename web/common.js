// Helpers shared by the chat and the dashboard pages. Every piece of text from the server is put into the
// page with textContent, never as HTML: message content and route fields are untrusted.

/** Creates an element with a class, optional text, and optional attributes. */
export function el(tag, className, text, attrs) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

/** Fetches JSON; throws an Error carrying the server's `error` text and the HTTP status. */
export async function getJson(url, init) {
  const res = await fetch(url, init);
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) {
    const err = new Error((body && body.error) || `HTTP ${res.status}`);
    err.status = res.status;
    throw err;
  }
  return body;
}

/** "3.2 s", "4 min", "2 h" for a duration in milliseconds. */
export function age(ms) {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** A random id of URL-safe characters. */
export function randomId(n = 16) {
  const abc = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = new Uint8Array(n);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => abc[b % abc.length]).join('');
}

/**
 * Replaces a container's children with a table of rows: columns are [header, (row) => text|Node, hint?].
 */
export function table(container, columns, rows, empty) {
  container.replaceChildren();
  if (rows.length === 0) {
    container.append(el('p', 'empty', empty || 'none'));
    return;
  }
  const t = el('table');
  const head = el('tr');
  // A column's optional third element explains it on hover.
  for (const [title, , hint] of columns) head.append(el('th', '', title, hint ? { title: hint } : undefined));
  t.append(el('thead'));
  t.firstChild.append(head);
  const body = el('tbody');
  for (const row of rows) {
    const tr = el('tr');
    if (row.__class) tr.className = row.__class;
    if (row.__id !== undefined) tr.dataset.id = String(row.__id);
    for (const [, cell] of columns) {
      const v = cell(row);
      const td = el('td');
      if (v instanceof globalThis.Node) td.append(v);
      else td.textContent = v === null || v === undefined ? '' : String(v);
      tr.append(td);
    }
    body.append(tr);
  }
  t.append(body);
  container.append(t);
}

/**
 * A time as the reader's local clock shows it (only the time today, else the date too), in a <time>
 * element whose hover shows the stored ISO value. Takes an ISO string or epoch milliseconds; '' for none.
 */
export function localTime(value) {
  if (value === null || value === undefined || value === '') return '';
  const d = new Date(typeof value === 'number' ? value : String(value));
  if (Number.isNaN(d.getTime())) return String(value);
  const today = d.toDateString() === new Date().toDateString();
  const text = today
    ? d.toLocaleTimeString()
    : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
  const iso = d.toISOString();
  return el('time', '', text, { datetime: iso, title: iso });
}

/**
 * The one vocabulary of run states on every page: an open run is `running` (a turn in progress) or `idle`
 * (its agent answered and waits for a follow-up until the idle timeout); an ended run shows its result.
 */
export const RUN_STATES = {
  running: 'a turn in progress',
  idle: 'answered; the agent waits for a follow-up',
  ok: 'ended normally',
  error: 'ended with an error',
  timeout: 'ended: the run timeout passed',
  stopped: 'ended by /stop or the dashboard',
};

/**
 * The two parts of a run's time, in the words every page uses: an agent works on its turns, then stays up
 * idle for a follow-up until the idle timeout. Lifetime (start → exit) is both together.
 */
export const RUN_TIME = {
  worked: 'agent start → its last answer, without the waits for a follow-up between turns',
  idle: 'after answering, the agent waited for a follow-up until the idle timeout (GATED_IDLE_TIMEOUT_MS), then exited; nobody waited for it',
};

/** A run's worked or idle time as text ('' while the run is open; '?' when it was not recorded). */
export function runTime(r, part) {
  if (r.ended_at === null || r.ended_at === undefined) return '';
  const ms = part === 'worked' ? r.work_ms : r.idle_ms;
  return ms === null || ms === undefined ? '?' : age(ms);
}

/** A run's state as a tag with its meaning on hover. */
export function runState(state) {
  return el('span', `tag run ${state}`, state, { title: RUN_STATES[state] || '' });
}

/** A run's reported tokens as "in / out" (empty when the agent reported none). */
export function tokens(r) {
  if (r.input_tokens === null && r.output_tokens === null) return '';
  const n = (v) => (v ?? 0).toLocaleString('en-US');
  return `${n(r.input_tokens)} / ${n(r.output_tokens)}`;
}

/** A cost in US dollars: cents from a cent up, two significant digits below (runs often cost less). */
export function usd(v) {
  if (v === 0) return '$0';
  return v >= 0.01 ? `$${v.toFixed(2)}` : `$${Number(v.toPrecision(2))}`;
}

/**
 * The frame of an admin page (access, approvals): the admin token typed into #token-form, kept in this
 * page's memory only and sent as a Bearer header; #notice for one line of news; a refresh that loads `url`,
 * hands the answer to `render` and stamps #updated, every `refreshMs` after `start()`.
 */
export function adminPage({ url, render, refreshMs }) {
  const $ = (id) => document.getElementById(id);
  let token = '';
  const page = {
    hasToken: () => token !== '',
    auth: () => (token ? { Authorization: `Bearer ${token}` } : {}),
    notice(text) {
      $('notice').textContent = text || '';
      $('notice').hidden = !text;
    },
    async refresh(clearNotice = true) {
      try {
        render(await getJson(url, { headers: page.auth() }));
        $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
        if (clearNotice) page.notice('');
      } catch (err) {
        page.notice(
          err.status === 401
            ? `${err.message}. Enter the admin token above.`
            : `refresh failed: ${err.message}`,
        );
      }
    },
    start() {
      $('token-form').addEventListener('submit', (e) => {
        e.preventDefault();
        token = $('token').value.trim();
        $('token').value = '';
        $('token-state').textContent = token ? 'token set (this page only)' : '';
        void page.refresh();
      });
      void page.refresh();
      setInterval(() => void page.refresh(false), refreshMs);
    },
  };
  return page;
}
