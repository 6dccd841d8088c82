#!/usr/bin/env node
// Rewrites test/durations.json, the test files' durations the sequencer orders a fresh clone's run by
// (test/sequencer.ts), from vitest's results cache of the last runs on this machine: a file the cache
// knows (and that passed) takes the cache's duration, the others keep theirs, files that no longer exist
// are dropped. Run it after a full `npm test`: `npm run test:durations`.
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const out = path.join(root, 'test/durations.json');
const cacheRoot = path.join(root, 'node_modules/.vite/vitest');
const durations = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, 'utf8')) : {};
for (const dir of fs.existsSync(cacheRoot) ? fs.readdirSync(cacheRoot) : []) {
  const file = path.join(cacheRoot, dir, 'results.json');
  if (!fs.existsSync(file)) continue;
  for (const [key, result] of JSON.parse(fs.readFileSync(file, 'utf8')).results ?? []) {
    const rel = key.slice(key.indexOf(':') + 1);
    if (!result.failed && result.duration > 0) durations[rel] = Math.round(result.duration);
  }
}
const kept = Object.keys(durations)
  .filter((rel) => fs.existsSync(path.join(root, rel)))
  .sort();
fs.writeFileSync(out, JSON.stringify(Object.fromEntries(kept.map((k) => [k, durations[k]])), null, 2) + '\n');
console.log(`test/durations.json: ${kept.length} files`);
