// What every part of the dashboard shares: the admin token (in this page's memory only: never in storage,
// a URL or the page source), the JSON helpers that send it, the notice line, links between views, and the
// panel registry through which a feature adds its own section to the overview.
import { el, getJson } from './common.js';

let token = '';
const tokenListeners = [];

/** The admin token typed on this page ('' when none). */
export function getToken() {
  return token;
}

/** Sets the token and tells the views (buttons that need it appear or hide). */
export function setToken(t) {
  token = t;
  for (const f of tokenListeners) f(token);
}

/** Calls `f(token)` whenever the token changes. */
export function onToken(f) {
  tokenListeners.push(f);
}

/** The Authorization header for the typed token, if any. */
export function auth() {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** GET /api/dashboard/<path> as JSON. */
export function api(path) {
  return getJson(`/api/dashboard/${path}`, { headers: auth() });
}

/** POST JSON to an admin endpoint with the token. */
export function adminPost(path, body) {
  return getJson(`/api/admin/${path}`, {
    method: 'POST',
    headers: { ...auth(), 'Content-Type': 'application/json' },
    body: JSON.stringify(body || {}),
  });
}

/** Shows (or, with no text, hides) the notice line under the header. */
export function notice(text) {
  const n = document.getElementById('notice');
  n.textContent = text || '';
  n.hidden = !text;
}

/** A link to a chat's view. */
export function chatLink(jid, text) {
  const a = el('a', 'chat-link', text ?? jid, { href: `#chat=${encodeURIComponent(jid)}` });
  a.dataset.jid = jid;
  return a;
}

/** A link to a run's view. */
export function runLink(id, text) {
  const a = el('a', 'run-link', text ?? `#${id}`, { href: `#run=${id}` });
  a.dataset.run = String(id);
  return a;
}

/** The error message for a failed read, with the hint a 401 needs. */
export function readError(err) {
  return err.status === 401 ? `${err.message}. Enter the admin token above.` : err.message;
}

const panels = [];

/**
 * Adds a section to the overview. `panel` = { id, title, hint?, wide?, refresh(container) }: refresh is
 * called with the section's body element on every overview refresh (every few seconds) and may throw;
 * the error is shown in the section instead of its content.
 */
export function registerPanel(panel) {
  panels.push(panel);
}

/** The registered panels, in registration order. */
export function registeredPanels() {
  return panels;
}
