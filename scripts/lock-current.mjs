#!/usr/bin/env node
// Exits 0 when DIR/node_modules holds what DIR/package-lock.json names, else 1: npm writes the packages it
// installed to node_modules/.package-lock.json, so every package of the lock (but the dev ones with
// --omit=dev, and optional ones for other platforms) must be there at the same version. A content check, not
// a time one: a checkout or worktree writes the lock again (newer than the install) without changing it.
// Used by the setup steps that run `npm ci` in a folder (scripts/agents-install.sh, setup.d/31-atproto.npm.sh).
//
// Usage: node scripts/lock-current.mjs DIR [--omit-dev]
import { readFileSync } from 'node:fs';

const [dir, flag] = process.argv.slice(2);
const read = (file) => {
  try {
    return JSON.parse(readFileSync(file, 'utf8')).packages ?? {};
  } catch {
    return undefined;
  }
};
const wanted = read(`${dir}/package-lock.json`);
const installed = read(`${dir}/node_modules/.package-lock.json`);
if (!wanted || !installed) process.exit(1);
for (const [path, entry] of Object.entries(wanted)) {
  if (path === '' || (flag === '--omit-dev' && entry.dev)) continue;
  const have = installed[path];
  if (!have) {
    if (entry.optional || entry.devOptional) continue;
    process.exit(1);
  }
  if (have.version !== entry.version) process.exit(1);
}
process.exit(0);
