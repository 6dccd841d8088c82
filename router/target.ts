import { isValidFolder } from '../core/types.js';

/** Where a route sends a message. */
export type Target =
  | { kind: 'folder'; folder: string }
  | { kind: 'builtin'; name: 'ping' | 'drop' }
  | { kind: 'daemon'; name: string };

const BUILTINS = new Set(['ping', 'drop']);
const DAEMON_NAME_RE = /^[A-Za-z0-9_.-]+$/;

/**
 * Parses a route target: `krons/content` or `folder:krons/content`, `builtin:ping`, `builtin:drop`,
 * `daemon:NAME`. Returns the typed target or the reason it is unusable.
 */
export function parseTarget(raw: string): Target | { error: string } {
  const t = raw.trim();
  if (t === '') return { error: 'empty target' };
  if (t.startsWith('builtin:')) {
    const name = t.slice('builtin:'.length);
    if (!BUILTINS.has(name)) return { error: `unknown builtin '${name}' (known: ping, drop)` };
    return { kind: 'builtin', name: name as 'ping' | 'drop' };
  }
  if (t.startsWith('daemon:')) {
    const name = t.slice('daemon:'.length);
    if (name === '') return { error: "empty daemon name in 'daemon:'" };
    if (!DAEMON_NAME_RE.test(name)) return { error: `bad daemon name '${name}'` };
    return { kind: 'daemon', name };
  }
  const folder = t.startsWith('folder:') ? t.slice('folder:'.length) : t;
  if (!t.startsWith('folder:') && /^[a-z]+:/.test(t)) return { error: `unknown target kind in '${t}'` };
  if (!isValidFolder(folder)) {
    return {
      error: `bad group folder '${folder}' (lowercase segments of a-z0-9_- joined by '/', no '..', no leading '/')`,
    };
  }
  return { kind: 'folder', folder };
}

/** The canonical spelling of a target (`folder:` dropped). */
export function formatTarget(t: Target): string {
  switch (t.kind) {
    case 'folder':
      return t.folder;
    case 'builtin':
      return `builtin:${t.name}`;
    case 'daemon':
      return `daemon:${t.name}`;
  }
}
