#!/usr/bin/env node
// `npm start`: `gated run` on the sources as they are now, compiled into dist/ only when a source changed
// since the last start (scripts/dist.mjs). Then the CLI runs in this process, so the start costs one Node,
// not two.
import { pathToFileURL } from 'node:url';
import { DIST_CLI, ensureDist } from './dist.mjs';

await ensureDist();
process.argv = [process.argv[0], DIST_CLI, 'run', ...process.argv.slice(2)];
await import(pathToFileURL(DIST_CLI).href);
