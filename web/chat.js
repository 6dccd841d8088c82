// The web chat: one pane per topic of the chosen group, side by side; each pane is its own session.
// History comes from /api/chat/history, then an EventSource follows /api/chat/stream from the newest id
// shown. EventSource reconnects by itself and sends Last-Event-ID; the server replays what was missed and
// the pane drops lines whose id it already shows. Who this browser is comes from gated: a visitor id in an
// HttpOnly cookie (the page never sees or sends it), or the admin after signing in with the admin token.
import { ApprovalBoxes, DraftBubble, fileNode } from './chat-parts.js';
import { recordControl } from './chat-record.js';
import { el, getJson, randomId } from './common.js';
import { markdownNode } from './markdown.js';

// Agent replies are Markdown (rendered as DOM nodes, never as HTML); everything else is plain text, a
// transcript of a voice message marked as one (docs/VOICE.md).
const textOf = (line) => {
  if (line.role === 'agent') return markdownNode(line.content);
  if (!line.transcript) return el('span', 'text', line.content);
  return el('span', 'text transcript', line.content, { title: 'transcript of the voice message' });
};

/** What a line (or one live part of it) shows: its text, a note when history cut it, its files. */
function bodyOf(group, line) {
  const frag = document.createDocumentFragment();
  const files = Array.isArray(line.files) ? line.files : [];
  if (line.content || files.length === 0) frag.append(textOf(line));
  if (typeof line.full_length === 'number')
    frag.append(el('span', 'cut', `… (${line.full_length.toLocaleString('en')} characters in all)`));
  for (const f of files) frag.append(fileNode(group, line.id, f));
  return frag;
}

const $ = (id) => document.getElementById(id);
const TOPIC_RE = /^[A-Za-z0-9_-]{1,64}$/;

const state = { group: '', panes: new Map(), me: { sender: '', admin: false } };

function notice(text) {
  const n = $('notice');
  n.textContent = text || '';
  n.hidden = !text;
}

function savedTopics(group) {
  try {
    const t = JSON.parse(localStorage.getItem(`gated.topics.${group}`) || '[""]');
    return Array.isArray(t) && t.every((x) => x === '' || TOPIC_RE.test(x)) ? t : [''];
  } catch {
    return [''];
  }
}

function saveTopics() {
  localStorage.setItem(`gated.topics.${state.group}`, JSON.stringify([...state.panes.keys()]));
}

const query = (group, topic) => `group=${encodeURIComponent(group)}&topic=${encodeURIComponent(topic)}`;

/** One topic of one group: its lines, its stream, its input. */
class Pane {
  constructor(group, topic) {
    this.group = group;
    this.topic = topic;
    this.shown = new Map();
    this.maxId = 0;
    this.root = el('section', 'pane', null, { 'data-topic': topic });
    const head = el('div', 'pane-head');
    head.append(el('h2', '', topic ? `#${topic}` : 'main'));
    this.conn = el('span', 'conn', 'connecting');
    head.append(this.conn);
    if (topic) {
      const x = el('button', 'close', '×', { title: 'close this topic', type: 'button' });
      x.addEventListener('click', () => closePane(topic));
      head.append(x);
    }
    this.restricted = el('p', 'restricted');
    this.restricted.hidden = true;
    this.lines = el('ol', 'lines');
    this.draft = new DraftBubble(this.lines);
    this.approvals = new ApprovalBoxes((code, approve) => this.press(code, approve));
    this.typing = el('p', 'typing', 'agent is working…');
    this.typing.hidden = true;
    this.form = el('form', 'composer');
    this.input = el('textarea', '', null, { rows: '2', placeholder: 'message', 'aria-label': 'message' });
    this.file = el('input', 'attach-input', null, {
      type: 'file',
      multiple: '',
      'aria-label': 'attach files',
    });
    this.file.hidden = true;
    const attach = el('button', 'attach', 'attach', { type: 'button', title: 'attach files' });
    attach.addEventListener('click', () => this.file.click());
    this.chosen = el('span', 'chosen');
    this.file.addEventListener('change', () => {
      this.chosen.textContent = [...this.file.files].map((f) => f.name).join(', ');
    });
    this.form.append(attach, this.file);
    // A recording is sent when it ends, with what is typed as its caption.
    const record = recordControl(
      (file) => void this.send([file]),
      (why) => notice(why),
    );
    if (record) this.form.append(record.button, record.clock);
    this.form.append(this.input, this.chosen, el('button', '', 'send', { type: 'submit' }));
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      void this.send();
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        void this.send();
      }
    });
    // Other chats of this session (a terminal's `gated chat`, a platform chat routed here): the agent's
    // memory is the session's, so the reader is told who else is in it.
    this.shared = el('p', 'shared');
    this.shared.hidden = true;
    this.root.append(head, this.restricted, this.shared, this.lines, this.typing, this.form);
    void this.load();
  }

  async refreshShared() {
    try {
      const { chats } = await getJson(`/api/chat/shared?${query(this.group, this.topic)}`);
      this.shared.textContent = chats.length
        ? `shares this session with ${chats.join(', ')}: the agent sees those chats too`
        : '';
      this.shared.hidden = chats.length === 0;
    } catch {
      // Only a hint: the chat works without it, and the next answer tries again.
    }
  }

  async load() {
    try {
      const h = await getJson(`/api/chat/history?${query(this.group, this.topic)}`);
      // A members-only group shows a stranger its own lines only, and says so.
      this.restricted.textContent = h.restricted || '';
      this.restricted.hidden = !h.restricted;
      for (const line of h.lines) this.add(line);
    } catch (err) {
      this.conn.textContent = `history failed: ${err.message}`;
    }
    void this.refreshShared();
    this.open();
  }

  open() {
    const es = new EventSource(`/api/chat/stream?${query(this.group, this.topic)}&after=${this.maxId}`);
    this.es = es;
    es.addEventListener('open', () => this.setConn('live'));
    es.addEventListener('error', () => {
      if (es.readyState !== EventSource.CLOSED) return this.setConn('reconnecting');
      // Refused (429: too many streams) or gone: the browser does not retry by itself; try again later.
      this.setConn('closed');
      setTimeout(() => {
        if (this.es === es) this.open();
      }, 10_000);
    });
    es.addEventListener('message', (ev) => this.add(JSON.parse(ev.data)));
    // Every (re)connect starts over from the draft and the working indicator the server shows now, if
    // any: one that went away while the tab was disconnected must not stay.
    es.addEventListener('ready', () => {
      this.draft.clear();
      this.typing.hidden = true;
    });
    es.addEventListener('draft', (ev) => this.draft.apply(JSON.parse(ev.data)));
    // An upload of a posted line reached the group's folder: "uploading" becomes its link or picture.
    es.addEventListener('file', (ev) => {
      const { id, file } = JSON.parse(ev.data);
      const pending = this.lines.querySelector(
        `li[data-id="${Number(id)}"] .file.pending[data-seq="${Number(file.seq)}"]`,
      );
      if (!pending) return;
      if (file.ready) pending.replaceWith(fileNode(this.group, id, file));
      else pending.textContent = `${file.name} (not saved)`;
    });
    // A posted voice message was transcribed: its line shows the words (or the note why there are none).
    es.addEventListener('transcript', (ev) => this.transcribed(JSON.parse(ev.data)));
    // The server replays at most one page of missed lines per response; the next page starts after the
    // newest line shown.
    es.addEventListener('more', () => {
      es.close();
      if (this.es === es) this.open();
    });
    es.addEventListener('typing', (ev) => {
      this.typing.hidden = !JSON.parse(ev.data).on;
      if (this.typing.hidden) void this.refreshShared();
    });
  }

  /** Replaces the text of a shown line by what its row reads after transcription; its files stay. */
  transcribed(line) {
    const texts = this.lines.querySelector(`li[data-id="${Number(line.id)}"] .texts`);
    if (!texts) return;
    texts.querySelector(':scope > .text')?.remove();
    texts.prepend(textOf(line));
  }

  setConn(text) {
    this.conn.textContent = text;
    this.conn.dataset.state = text;
  }

  /**
   * Shows a line. A whole row (part null) creates its line or replaces the parts shown so far; a live part
   * creates the line or is appended when it is the next one; anything already covered is dropped.
   */
  add(line) {
    const part = typeof line.part === 'number' ? line.part : null;
    const have = this.shown.get(line.id);
    if (have) {
      if (have.whole) return;
      if (part === null) {
        have.texts.replaceChildren(bodyOf(this.group, line));
        have.whole = true;
        if (line.approval) this.approvals.update(line.approval);
      } else if (part === have.next) {
        have.texts.append(bodyOf(this.group, line));
        have.next += 1;
      }
      return;
    }
    this.maxId = Math.max(this.maxId, line.id);
    const li = el('li', `line ${line.role}`, null, { 'data-id': line.id });
    const who = line.role === 'user' ? userLabel(line) : line.role === 'agent' ? 'agent' : line.role;
    const texts = el('span', 'texts');
    texts.append(bodyOf(this.group, line));
    li.append(el('span', 'who', who), texts);
    const box = line.approval ? this.approvals.node(line.approval) : null;
    if (box) li.append(box);
    li.title = line.timestamp;
    this.shown.set(line.id, { texts, whole: part === null, next: (part ?? 0) + 1 });
    // Lines arrive in id order except when a live echo overtakes a replayed reply; keep the list sorted.
    let before = null;
    for (
      let n = this.lines.lastElementChild;
      n && Number(n.dataset.id) > line.id;
      n = n.previousElementSibling
    )
      before = n;
    this.lines.insertBefore(li, before);
    if (line.role !== 'user') this.typing.hidden = true;
    this.lines.scrollTop = this.lines.scrollHeight;
  }

  /** Posts the composer's text (JSON to /send) or its text and files (multipart to /upload). */
  post(body, files) {
    if (files.length === 0) {
      return getJson('/api/chat/send', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    }
    const form = new FormData();
    for (const [k, v] of Object.entries(body)) form.append(k, v);
    for (const f of files) form.append('file', f, f.name);
    return getJson('/api/chat/upload', { method: 'POST', body: form });
  }

  /** Sends what is typed with the chosen files and, when one ends, a recording (`recorded`). */
  async send(recorded = []) {
    const content = this.input.value;
    const files = [...this.file.files, ...recorded];
    if (!content.trim() && files.length === 0) return;
    this.input.value = '';
    this.file.value = '';
    this.chosen.textContent = '';
    const body = { group: this.group, topic: this.topic, content, clientMsgId: randomId() };
    try {
      const r = await this.post(body, files);
      if (r.id) {
        const now = new Date().toISOString();
        this.add({
          id: r.id,
          role: 'user',
          content,
          sender: state.me.sender.replace(/^web:/, ''),
          sender_name: null,
          topic: this.topic,
          timestamp: now,
          files: r.files,
        });
      }
    } catch (err) {
      this.input.value = content;
      notice(`not sent: ${err.message}`);
    }
  }

  /**
   * Presses an approval button: the command is posted as this browser's message, so gated checks it like a
   * typed `/approve CODE` from this sender (an approver's decides; anyone else is told why not).
   */
  async press(code, approve) {
    const content = `/${approve ? 'approve' : 'reject'} ${code}`;
    const body = { group: this.group, topic: this.topic, content, clientMsgId: randomId() };
    try {
      const r = await this.post(body, []);
      if (r.id) {
        const now = new Date().toISOString();
        this.add({
          id: r.id,
          role: 'user',
          content,
          sender: state.me.sender.replace(/^web:/, ''),
          sender_name: null,
          topic: this.topic,
          timestamp: now,
        });
      }
    } catch (err) {
      notice(`not sent: ${err.message}`);
    }
  }

  close() {
    this.es?.close();
    this.es = null;
    this.root.remove();
  }
}

/**
 * Who wrote a person's line: "you" for this browser's own lines, else the name the writer gave, else their
 * visitor id shortened (v3f0912…), so two visitors of one chat are told apart.
 */
function userLabel(line) {
  const mine = state.me.sender !== '' && `web:${line.sender}` === state.me.sender;
  if (mine) return 'you';
  if (line.sender_name) return line.sender_name;
  const id = String(line.sender ?? '');
  return id.length > 8 ? `${id.slice(0, 7)}…` : id || 'someone';
}

function openPane(topic) {
  if (state.panes.has(topic)) return;
  const pane = new Pane(state.group, topic);
  state.panes.set(topic, pane);
  $('panes').append(pane.root);
  saveTopics();
}

function closePane(topic) {
  state.panes.get(topic)?.close();
  state.panes.delete(topic);
  saveTopics();
}

function selectGroup(group) {
  for (const p of state.panes.values()) p.close();
  state.panes.clear();
  state.group = group;
  localStorage.setItem('gated.group', group);
  if (window.location.hash.slice(1) !== group) window.history.replaceState(null, '', `#${group}`);
  for (const t of savedTopics(group)) openPane(t);
}

/** Shows who this browser is, and the admin sign-in (the token is sent once, never kept by the page). */
async function identity() {
  state.me = await getJson('/api/chat/me');
  $('me').textContent = state.me.admin ? `${state.me.sender} (admin)` : `you are ${state.me.sender}`;
  $('admin-login').hidden = state.me.admin;
  $('admin-logout').hidden = !state.me.admin;
}

function identityForms() {
  $('admin-login').addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = $('admin-token').value;
    $('admin-token').value = '';
    try {
      await getJson('/api/chat/login', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token }),
      });
      window.location.reload();
    } catch (err) {
      notice(`not signed in: ${err.message}`);
    }
  });
  $('admin-logout').addEventListener('click', async () => {
    await getJson('/api/chat/logout', { method: 'POST' }).catch(() => null);
    window.location.reload();
  });
}

async function main() {
  let groups = [];
  identityForms();
  try {
    await identity();
  } catch (err) {
    notice(`cannot tell who you are: ${err.message}`);
  }
  try {
    groups = (await getJson('/api/chat/groups')).groups;
  } catch (err) {
    notice(`cannot list groups: ${err.message}`);
    return;
  }
  if (groups.length === 0) {
    notice('No group is registered yet. Add one with: gated groups add demo');
    return;
  }
  const select = $('group');
  for (const g of groups)
    select.append(el('option', '', g.name ? `${g.name} (${g.folder})` : g.folder, { value: g.folder }));
  const wanted = [decodeURIComponent(window.location.hash.slice(1)), localStorage.getItem('gated.group')];
  const first = wanted.find((w) => w && groups.some((g) => g.folder === w)) || groups[0].folder;
  select.value = first;
  select.addEventListener('change', () => selectGroup(select.value));
  $('add-topic').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('new-topic').value.trim().replace(/^#/, '');
    if (!TOPIC_RE.test(t)) {
      notice('a topic is 1-64 letters, digits, _ or -');
      return;
    }
    notice('');
    $('new-topic').value = '';
    openPane(t);
  });
  selectGroup(first);
}

void main();
