/**
 * The Claude agent (agents/claude) through gated vs the agent alone, per runtime, against the local
 * Messages API server streaming a one-second answer (`SLOW 1`): time to the first draft (`partial` block)
 * and to the final answer, and the agent's memory. Every sample is a cold run (a new agent process or
 * container, a new Claude Code CLI), which is what a chat's first message after a quiet spell costs.
 *
 * - alone: the runtime starts the agent and the first input line is written to it directly; times run from
 *   the start call to the blocks on its stdout.
 * - through gated: a whole gated (poll loop, queue, runtime, delivery to the web chat); times run from the
 *   inbound row's insert to the first draft reaching gated and to the reply delivered to the chat.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../core/config.js';
import { silentLogger } from '../core/log.js';
import { packageFile } from '../core/paths.js';
import { startGated } from '../gated/app.js';
import { createDockerRuntime } from '../queue/runtime/docker.js';
import { createProcessRuntime } from '../queue/runtime/process.js';
import type { Runtime } from '../queue/runtime/types.js';
import { openDatabase } from '../store/db.js';
import { addGroup } from '../store/groups.js';
import { startDockerd } from '../test/infra/dockerd.js';
import { MessagesApiServer } from '../test/infra/messages-api.js';

/** One runtime's figures (medians, ms; memory in MB). */
export interface ClaudeBenchRow {
  runtime: string;
  samples: number;
  aloneDraftMs: number;
  aloneFinalMs: number;
  gatedDraftMs: number;
  gatedFinalMs: number;
  draftRatio: number;
  finalRatio: number;
  /** Peak RSS of the agent's own Node process and of the Claude Code CLI it runs (process runtime). */
  agentRssMB?: number;
  cliRssMB?: number;
}

const PROMPT = '<messages>\n<message sender="bench" time="t">SLOW 1</message>\n</messages>';
const AGENT = packageFile('agents', 'claude', 'agent.mjs');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
};
const round = (x: number) => Math.round(x);

// Folders made by this bench, removed at its end.
const made: string[] = [];
const tempDir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
};

function secrets(api: MessagesApiServer): Record<string, string> {
  return { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: api.url, CLAUDE_CODE_MAX_RETRIES: '0' };
}

/** RSS in MB of `pid` and, separately, of all its descendants (from /proc). */
function rssTree(pid: number): { self: number; children: number } {
  const rss = (p: number) => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      return m ? Number(m[1]) / 1024 : 0;
    } catch {
      return 0;
    }
  };
  const kids = (p: number): number[] => {
    try {
      const ids = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      return ids.map(Number).flatMap((c) => [c, ...kids(c)]);
    } catch {
      return [];
    }
  };
  return { self: rss(pid), children: kids(pid).reduce((a, c) => a + rss(c), 0) };
}

/** The agent alone on `runtime`: start, one input line, blocks read from its stdout. */
async function alone(
  runtime: Runtime,
  api: MessagesApiServer,
  groupDir: string,
  pidOf?: () => number | null,
) {
  const t0 = performance.now();
  const handle = await runtime.start({ runId: 1, group: 'bench', topic: '', groupDir });
  let draft = NaN;
  let text = '';
  let peak = { self: 0, children: 0 };
  const sampler = setInterval(() => {
    const pid = pidOf?.();
    if (!pid) return;
    const r = rssTree(pid);
    peak = { self: Math.max(peak.self, r.self), children: Math.max(peak.children, r.children) };
  }, 50);
  const final = await new Promise<number>((resolve, reject) => {
    handle.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (Number.isNaN(draft) && text.includes('"partial":true')) draft = performance.now() - t0;
      if (/"usage":/.test(text)) resolve(performance.now() - t0);
    });
    handle.stdout.once('end', () =>
      reject(new Error(`the agent ended without an answer: ${text.slice(-500)}`)),
    );
    handle.write(
      JSON.stringify({
        turn: 1,
        prompt: PROMPT,
        sessionId: null,
        group: 'bench',
        topic: '',
        chatJid: 'web:bench',
        messages: [],
        secrets: secrets(api),
      }) + '\n',
    );
  });
  clearInterval(sampler);
  handle.closeStdin();
  await handle.exited;
  return { draft, final, peak };
}

/** The same turn through a whole gated on `makeRuntime`; `n` cold runs. */
async function throughGated(api: MessagesApiServer, n: number, makeRuntime: (groupsDir: string) => Runtime) {
  const dir = tempDir('gated-bench-claude-');
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_POLL_MS: '50',
    GATED_IDLE_TIMEOUT_MS: '200',
    GATED_AGENT_SECRETS: 'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL,CLAUDE_CODE_MAX_RETRIES',
    ...secrets(api),
  });
  const db0 = openDatabase(config.db);
  addGroup(db0, config.groupsDir, 'bench');
  // The test engine has no bridge: containers reach the loopback API on the host's network.
  db0.prepare(`UPDATE registered_groups SET network = 'host'`).run();
  db0.close();
  // The first draft is timed where gated reads it: a tee on the agent's stdout.
  let draftAt = NaN;
  const inner = makeRuntime(config.groupsDir);
  const runtime: Runtime = {
    ...inner,
    name: inner.name,
    ping: () => inner.ping(),
    async start(spec) {
      const h = await inner.start(spec);
      h.stdout.on('data', (c: Buffer) => {
        if (Number.isNaN(draftAt) && c.toString('utf8').includes('"partial":true'))
          draftAt = performance.now();
      });
      return h;
    },
  };
  const gated = await startGated({ config, log: silentLogger(), channels: [], http: false, runtime });
  const drafts: number[] = [];
  const finals: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      draftAt = NaN;
      const t0 = performance.now();
      const id = gated.gateway.sink({ chat_jid: 'web:bench', sender: 'bench', content: 'SLOW 1' })!;
      const sent = gated.db.prepare(`SELECT delivery FROM messages WHERE reply_to_id = ?`).pluck();
      while (sent.get(id) !== 'sent') await new Promise((r) => setTimeout(r, 5));
      finals.push(performance.now() - t0);
      drafts.push(draftAt - t0);
      // Wait for the run to end so that the next sample is a cold start too.
      const open = gated.db.prepare(`SELECT COUNT(*) FROM session_log WHERE result IS NULL`).pluck();
      while ((open.get() as number) > 0) await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await gated.close(5000);
  }
  return { draft: median(drafts), final: median(finals) };
}

function row(
  runtime: string,
  n: number,
  a: Awaited<ReturnType<typeof alone>>[],
  g: { draft: number; final: number },
) {
  const aDraft = median(a.map((x) => x.draft));
  const aFinal = median(a.map((x) => x.final));
  return {
    runtime,
    samples: n,
    aloneDraftMs: round(aDraft),
    aloneFinalMs: round(aFinal),
    gatedDraftMs: round(g.draft),
    gatedFinalMs: round(g.final),
    draftRatio: Math.round((g.draft / aDraft) * 100) / 100,
    finalRatio: Math.round((g.final / aFinal) * 100) / 100,
  };
}

/** Runs the comparison on the process runtime and, when `docker` is true, on a real dockerd. */
export async function claudeBench(n: number, docker: boolean): Promise<ClaudeBenchRow[]> {
  const api = await MessagesApiServer.start();
  const rows: ClaudeBenchRow[] = [];
  try {
    const dir = tempDir('gated-bench-claude-alone-');
    mkdirSync(join(dir, 'bench'), { recursive: true });
    // The process runtime runs `sh -c`; exec makes the agent the process whose memory is sampled.
    const proc = createProcessRuntime({ cmd: `exec node '${AGENT}'` });
    const samples = [];
    let pid: number | null = null;
    for (let i = 0; i < n; i++) {
      // The process runtime does not expose the pid: find the agent by its command line.
      samples.push(await alone(proc, api, join(dir, 'bench'), () => (pid ??= findAgentPid())));
      pid = null;
    }
    const g = await throughGated(api, n, () => createProcessRuntime({ cmd: `node '${AGENT}'` }));
    rows.push({
      ...row('process', n, samples, g),
      agentRssMB: round(Math.max(...samples.map((s) => s.peak.self))),
      cliRssMB: round(Math.max(...samples.map((s) => s.peak.children))),
    });
    if (docker) {
      const engine = await startDockerd();
      try {
        const image = await engine.buildAgentImage(
          'gated-bench-claude:latest',
          packageFile('agents', 'claude'),
        );
        const make = (groupsDir: string) =>
          createDockerRuntime({
            docker: engine.docker,
            image,
            instanceId: 'bench-claude',
            groupsDir,
          });
        const ddir = tempDir('gated-bench-claude-docker-');
        const drt = make(ddir);
        const dsamples = [];
        for (let i = 0; i < n; i++) {
          dsamples.push(
            await alone(
              { ...drt, start: (spec) => drt.start({ ...spec, network: 'host' }) },
              api,
              join(ddir, 'bench'),
            ),
          );
        }
        const dg = await throughGated(api, n, make);
        rows.push(row('docker', n, dsamples, dg));
      } finally {
        await engine.stop();
      }
    }
  } finally {
    await api.close();
    for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
  }
  return rows;
}

/** The pid of the newest `node …agents/claude/agent.mjs` process (the agent started alone). */
function findAgentPid(): number | null {
  let best: number | null = null;
  for (const pid of readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.startsWith('node\0') && cmd.includes(AGENT) && (best === null || pid > best)) best = pid;
    } catch {
      // the process is gone
    }
  }
  return best;
}
