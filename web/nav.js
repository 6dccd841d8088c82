// The one navigation of every page: the same links in the same order, the current one marked. A page adds
// nothing of its own here; a new page is one more entry in PAGES (and appears everywhere at once).
import { el } from './common.js';

/** The pages, in the order the header shows them. `here(path, hash)` says whether the reader is on it. */
export const PAGES = [
  {
    href: '/dashboard',
    label: 'dashboard',
    here: (p, h) => p === '/dashboard' && !/^#(runs|chats|chat=|run=)/.test(h),
  },
  { href: '/dashboard#runs', label: 'runs', here: (p, h) => p === '/dashboard' && /^#(runs|run=)/.test(h) },
  {
    href: '/dashboard#chats',
    label: 'chats',
    here: (p, h) => p === '/dashboard' && /^#(chats|chat=)/.test(h),
  },
  { href: '/dashboard/tasks', label: 'tasks', here: (p) => p === '/dashboard/tasks' },
  { href: '/dashboard/memory', label: 'memory', here: (p) => p === '/dashboard/memory' },
  { href: '/dashboard/access', label: 'access', here: (p) => p === '/dashboard/access' },
  { href: '/dashboard/approvals', label: 'approvals', here: (p) => p === '/dashboard/approvals' },
  { href: '/dashboard/workflows', label: 'workflows', here: (p) => p === '/dashboard/workflows' },
  { href: '/dashboard/waiting', label: 'waiting', here: (p) => p === '/dashboard/waiting' },
  { href: '/', label: 'web chat', here: (p) => p === '/' },
];

function mark(nav) {
  const { pathname, hash } = window.location;
  for (const a of nav.querySelectorAll('a')) {
    const page = PAGES.find((p) => p.href === a.getAttribute('href'));
    if (page && page.here(pathname, hash)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/** Fills the page's `<nav id="site-nav">` (once) and keeps the current page marked. */
export function mountNav() {
  const nav = document.getElementById('site-nav');
  if (!nav || nav.childElementCount > 0) return;
  for (const p of PAGES) nav.append(el('a', '', p.label, { href: p.href }));
  mark(nav);
  window.addEventListener('hashchange', () => mark(nav));
}

mountNav();
