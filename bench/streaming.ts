import type { DraftOps } from '../channels/channel.js';
import { packageFile } from '../core/paths.js';
import type { Gated } from '../gated/app.js';
import { BenchChannel } from './channel.js';
import { monitorLoopDelay } from './loop-delay.js';
import { benchInstance, healthProber, pct } from './pipeline.js';

/**
 * Concurrent streaming turns (issue 49): `chats` chats, each with an agent (bench/stream-agent.sh) that
 * streams one long answer as drafts, a partial block every 100 ms for `streamMs`, while a canary chat (its
 * agent answers at once) is asked every second and /healthz every 50 ms. The platform is the bench's
 * in-process channel with drafts (open, edit, remove counted, instant): what is measured is gated's side,
 * the drafts' coalescing and the event loop, not a platform's network or its rate limits (the edits per
 * second gated asked for are printed beside Telegram's documented 30 messages a second per bot).
 * bench/streaming-telegram.ts runs the same scenario over Telegram (`StreamSide`), with its flood limits.
 */

/** The platform a streaming run goes through: how a chat is asked, and what it showed. */
export interface StreamSide {
  /** The chat of group `g`. */
  jid(g: number): string;
  ask(g: number, content: string): void;
  /** When the text naming `tok` was first shown as an answer, or undefined. */
  shownAt(tok: string): number | undefined;
  /** How many answers were shown more than once (or beside a stale draft). */
  twice(): number;
  /** When each chat's first draft was shown (chat JID → epoch ms). */
  readonly firstDraftAt: Map<string, number>;
  opened(): number;
  edits(): number;
  /** Draft calls in the busiest second. */
  callsPerSecondMax(): number;
  /** Figures of the platform's own (Telegram: its 429s). */
  more?(): Record<string, number>;
}

/** The bench channel with drafts: counts them, and takes a final edit's tokens as the answer delivered. */
class StreamChannel extends BenchChannel {
  opened = 0;
  edits = 0;
  removed = 0;
  readonly firstDraftAt = new Map<string, number>();
  /** Draft calls (open, edit, remove) per second since the start. */
  readonly perSecond = new Map<number, number>();
  private readonly t0 = Date.now();
  private next = 0;

  private count(): void {
    const s = Math.floor((Date.now() - this.t0) / 1000);
    this.perSecond.set(s, (this.perSecond.get(s) ?? 0) + 1);
  }

  readonly drafts: DraftOps = {
    open: async (chatJid) => {
      this.opened++;
      this.count();
      if (!this.firstDraftAt.has(chatJid)) this.firstDraftAt.set(chatJid, Date.now());
      return `d${++this.next}`;
    },
    edit: async (_chat, _id, text, final) => {
      this.count();
      if (final) this.record(text);
      else this.edits++;
    },
    remove: async () => {
      this.removed++;
      this.count();
    },
  };
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/** The bench channel as a StreamSide. */
function benchSide(channel: StreamChannel): StreamSide {
  return {
    jid: (g) => `bench:g${g}`,
    ask: (g, content) => channel.sink!({ chat_jid: `bench:g${g}`, sender: 'bench', content }),
    shownAt: (tok) => channel.deliveries.get(tok)?.[0],
    twice: () => [...channel.deliveries.values()].filter((d) => d.length > 1).length,
    firstDraftAt: channel.firstDraftAt,
    opened: () => channel.opened,
    edits: () => channel.edits,
    callsPerSecondMax: () => Math.max(...channel.perSecond.values()),
  };
}

/** The agent's command for streams of `streamMs`. */
export function streamAgentCmd(streamMs: number): string {
  // The agent's environment is gated's own choice (none of this process's): the length goes in the command.
  return `STREAM_MS=${streamMs} exec bash '${packageFile('bench', 'stream-agent.sh')}'`;
}

/**
 * With `warm`, each chat's agent is started by a short first message (answered at once) before the streams
 * are asked, as in a conversation whose agents are still within their idle timeout: the first draft is
 * then gated's and the live agent's, not 200 process starts on the machine's cores.
 */
export async function streaming(chats: number, streamMs: number, warm = false) {
  const channel = new StreamChannel();
  const inst = await benchInstance({
    groups: chats + 1,
    maxConcurrent: chats + 1,
    // Warm: long enough that no agent of the warm-up ends before its stream is asked.
    idleMs: warm ? 120_000 : 5000,
    pollMs: 100,
    http: true,
    channel,
    env: { GATED_STREAM_CHANNELS: 'bench', GATED_AGENT_CMD: streamAgentCmd(streamMs) },
  });
  try {
    return await streamRun(inst.gated, benchSide(channel), chats, streamMs, warm);
  } finally {
    await inst.close();
  }
}

/**
 * The scenario on a started gated whose groups 0..chats-1 stream and group `chats` is the canary's, through
 * `side`: the figures of bench/README.md's table.
 */
export async function streamRun(
  gated: Gated,
  side: StreamSide,
  chats: number,
  streamMs: number,
  warm = false,
) {
  const canaryGroup = chats;
  const sink = (g: number, content: string) => side.ask(g, content);
  let tok = 0;
  const asked = new Map<string, number>();
  const canary = async (): Promise<number> => {
    const t = `tok-${++tok}`;
    const at = Date.now();
    asked.set(t, at);
    sink(canaryGroup, `canary ${t}`);
    const deadline = at + 60_000;
    while (side.shownAt(t) === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    return (side.shownAt(t) ?? NaN) - at;
  };
  // The canary idle (its agent started, then answered again warm), before any stream.
  await canary();
  const idle: number[] = [];
  for (let i = 0; i < 3; i++) {
    // A second apart, as while busy: Telegram takes about one message a second in a chat.
    await new Promise((r) => setTimeout(r, 1000));
    idle.push(await canary());
  }
  if (warm) await warmUp(side, chats, () => `tok-${++tok}`);
  const loop = monitorLoopDelay(10);
  const health = healthProber(gated.url!);
  let peakRss = process.memoryUsage().rss;
  // Where the first draft's time goes: the message → its agent working → its first partial at gated.
  const workingAt = new Map<string, number>();
  const partialAt = new Map<string, number>();
  // When the agent's bash began (its first partial names it): the agent's own start, apart from gated's.
  const upAt = new Map<string, number>();
  const inAt = new Map<string, number>();
  const offWorking = gated.signals.working.on(({ chatJid, on }) => {
    if (on && !workingAt.has(chatJid)) workingAt.set(chatJid, Date.now());
  });
  const offPartial = gated.signals.partial.on(({ chatJid, text }) => {
    if (partialAt.has(chatJid)) return;
    partialAt.set(chatJid, Date.now());
    const up = /up:(\d+)/.exec(text);
    if (up) upAt.set(chatJid, Number(up[1]));
    const got = /in:(\d+)/.exec(text);
    if (got) inAt.set(chatJid, Number(got[1]));
  });
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  const streams: string[] = [];
  for (let g = 0; g < chats; g++) {
    const t = `tok-${++tok}`;
    streams.push(t);
    asked.set(t, Date.now());
    sink(g, `tell me a long story ${t}`);
  }
  const busy: number[] = [];
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
  while (streams.some((t) => side.shownAt(t) === undefined) && Date.now() - t0 < streamMs + 120_000) {
    busy.push(await canary());
    await new Promise((r) => setTimeout(r, 1000));
  }
  clearInterval(sampler);
  offWorking();
  offPartial();
  const wall = (Date.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  loop.stop();
  const h = await health.stop();
  const groupOf = new Map(streams.map((_, g) => [side.jid(g), g]));
  const since = (at: Map<string, number>) =>
    [...at]
      .filter(([chat]) => groupOf.has(chat))
      .map(([chat, t]) => t - asked.get(streams[groupOf.get(chat)!]!)!)
      .sort((a, b) => a - b);
  const first = since(side.firstDraftAt);
  const working = since(workingAt);
  const firstPartial = since(partialAt);
  const up = since(upAt);
  const firstLine = since(inAt);
  const delivered = streams.filter((t) => side.shownAt(t) !== undefined).length;
  const twice = side.twice();
  idle.sort((a, b) => a - b);
  busy.sort((a, b) => a - b);
  const partials = chats * Math.floor(streamMs / 100);
  return {
    scenario: warm ? 'streaming-warm' : 'streaming',
    chats,
    streamSeconds: streamMs / 1000,
    delivered,
    answeredTwice: twice,
    wallSeconds: round(wall),
    eventLoopDelayP99ms: round(loop.percentile(99)),
    eventLoopDelayMaxMs: round(loop.max()),
    // Partial blocks the agents printed, and the draft edits gated made of them (the rest coalesced).
    partialBlocks: partials,
    draftOpens: side.opened(),
    draftEdits: side.edits(),
    coalesced: partials - side.edits() - side.opened(),
    draftCallsPerSecondMax: side.callsPerSecondMax(),
    firstDraftP50ms: pct(first, 50),
    firstDraftMaxMs: first.at(-1) ?? NaN,
    // Of the first draft's time: until the run was started (typing on), its agent's bash began, it read
    // its first line, and its first partial (100 ms after that line in the agent) was read by gated.
    workingP50ms: pct(working, 50),
    agentUpP50ms: pct(up, 50),
    firstLineP50ms: pct(firstLine, 50),
    firstPartialP50ms: pct(firstPartial, 50),
    canaryIdleP50ms: pct(idle, 50),
    canaryP50ms: pct(busy, 50),
    canaryMaxMs: busy.at(-1) ?? NaN,
    healthzP99ms: round(pct(h.latencies, 99)),
    healthzFailed: h.failed,
    gatedCpuSeconds: round((cpu.user + cpu.system) / 1e6),
    peakRssMB: Math.round(peakRss / 2 ** 20),
    ...side.more?.(),
  };
}

/**
 * Starts the agents of chats 0..chats-1 with a message each that they answer at once (a line naming the
 * canary), and waits until every answer is shown; what the warm-up showed is not the streams' first draft.
 */
async function warmUp(side: StreamSide, chats: number, nextTok: () => string): Promise<void> {
  const toks: string[] = [];
  for (let g = 0; g < chats; g++) {
    const t = nextTok();
    toks.push(t);
    side.ask(g, `canary warm-up ${t}`);
  }
  const deadline = Date.now() + 120_000;
  while (toks.some((t) => side.shownAt(t) === undefined)) {
    if (Date.now() > deadline) throw new Error('the warm-up was not answered');
    await new Promise((r) => setTimeout(r, 20));
  }
  side.firstDraftAt.clear();
}
