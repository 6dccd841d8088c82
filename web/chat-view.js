// The chat view: every chat gated has seen, and the conversation of one (inbound and outbound), searchable
// by text and sender, a page of rows at a time; with the admin token, a chat's parked rows can be retried
// and its limited rows released.
import { el, localTime, table } from './common.js';
import { adminPost, api, chatLink, getToken, notice, onToken, readError } from './dash-core.js';
import { messageItem } from './messages.js';

const PAGE = 200;
let current = null;
let nextBefore = null;

const $ = (id) => document.getElementById(id);

/** Lists chats, newest activity first, filtered by the JID search box. */
export async function refreshChats() {
  const q = $('chat-search').value.trim();
  try {
    const r = await api(`chats?limit=200${q ? `&q=${encodeURIComponent(q)}` : ''}`);
    table(
      $('chat-list'),
      [
        ['chat', (c) => chatLink(c.chat_jid)],
        ['rows', (c) => c.messages],
        ['last', (c) => localTime(c.last_at)],
      ],
      r.chats.map((c) => ({ ...c, __class: c.chat_jid === current ? 'chat current' : 'chat' })),
      q ? 'no chat matches' : 'no messages yet',
    );
  } catch (err) {
    $('chat-list').replaceChildren(el('p', 'bad', readError(err)));
  }
}

function filters() {
  const p = new URLSearchParams({ jid: current, limit: String(PAGE) });
  const text = $('chat-text').value.trim();
  const sender = $('chat-sender').value.trim();
  if (text) p.set('q', text);
  if (sender) p.set('sender', sender);
  return p;
}

/** Loads the newest page of the chat (or, with `older`, the page before what is shown). */
async function load(older) {
  const p = filters();
  if (older && nextBefore) p.set('before', String(nextBefore));
  try {
    const r = await api(`chat?${p}`);
    const list = $('chat-messages');
    const items = r.messages.slice().reverse().map(messageItem);
    if (older) list.prepend(...items);
    else list.replaceChildren(...items);
    nextBefore = r.next_before;
    $('chat-older').hidden = nextBefore === null;
    const shown = list.children.length;
    $('chat-count').textContent = `${shown} row${shown === 1 ? '' : 's'} shown`;
    $('chat-count').dataset.count = String(shown);
    if (!older) list.lastElementChild?.scrollIntoView({ block: 'end' });
  } catch (err) {
    $('chat-messages').replaceChildren(el('li', 'bad', readError(err)));
  }
}

/** Shows the chat `jid`. */
export async function openChat(jid) {
  current = jid;
  nextBefore = null;
  $('chat-title').textContent = jid;
  $('chat-main').hidden = false;
  await Promise.all([load(false), refreshChats()]);
}

async function act(path, what) {
  try {
    const r = await adminPost(path, { chat_jid: current });
    notice(`${what}: ${r.retried ?? r.released ?? 0} rows`);
    await load(false);
  } catch (err) {
    notice(`${what} failed: ${err.message}`);
  }
}

/** Wires the chat view's forms and buttons (once). */
export function mountChatView() {
  $('chat-search-form').addEventListener('submit', (e) => {
    e.preventDefault();
    void refreshChats();
  });
  $('chat-filter').addEventListener('submit', (e) => {
    e.preventDefault();
    void load(false);
  });
  $('chat-older').addEventListener('click', () => void load(true));
  $('chat-retry').addEventListener('click', () => void act('chats/retry', 'retry parked rows'));
  $('chat-release').addEventListener('click', () => void act('chats/release', 'release limited rows'));
  onToken((t) => ($('chat-admin').hidden = !t));
  $('chat-admin').hidden = !getToken();
}
