import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { startDockerd } from '../test/infra/dockerd.js';
import { benchInstance, pct } from './pipeline.js';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';

/**
 * One bare cycle with dockerode alone, the floor gated's docker runtime stands on: create, attach, start,
 * write one input line, read until the first output block ends, close stdin, wait, remove. Returns the
 * time to the first reply and to the container's removal.
 */
async function bareCycle(docker: Docker, image: string): Promise<{ replyMs: number; cycleMs: number }> {
  const t0 = performance.now();
  const container = await docker.createContainer({
    Image: image,
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    HostConfig: { NetworkMode: 'none' },
  });
  const stream = (await container.attach({
    stream: true,
    stdin: true,
    stdout: true,
    stderr: true,
    hijack: true,
  })) as NodeJS.ReadWriteStream & {
    end(): void;
  };
  const out = new PassThrough();
  docker.modem.demuxStream(stream, out, new PassThrough());
  let text = '';
  const replied = new Promise<number>((resolve) =>
    out.on('data', (d) => {
      text += String(d);
      if (text.includes(END)) resolve(performance.now());
    }),
  );
  await container.start();
  stream.write(
    JSON.stringify({
      prompt: 'tok-0',
      sessionId: null,
      group: 'bare',
      topic: '',
      chatJid: 'bench:bare',
      messages: [],
    }) + '\n',
  );
  const replyAt = await replied;
  if (!text.includes(START)) throw new Error('bare container answered without a block');
  stream.end();
  await container.wait();
  await container.remove({ force: true });
  return { replyMs: replyAt - t0, cycleMs: performance.now() - t0 };
}

/**
 * Scenario 5: gated's run overhead over bare dockerode on the real engine. The same image answers one
 * message per run, `runs` times in a row, bare and through gated (ingest → reply delivered; ingest → run
 * ended). The ratio is gated / bare.
 */
export async function dockerOverhead(runs: number) {
  const dockerd = await startDockerd();
  try {
    const image = await dockerd.buildAgentImage('gated-bench-agent:latest');
    await bareCycle(dockerd.docker, image);
    const bare: { replyMs: number; cycleMs: number }[] = [];
    for (let i = 0; i < runs; i++) bare.push(await bareCycle(dockerd.docker, image));

    const { reply: gatedReply, cycle: gatedCycle } = await gatedCycles('docker', dockerd.host, image, runs);
    const med = (xs: number[]) =>
      pct(
        [...xs].sort((a, b) => a - b),
        50,
      );
    const bareReply = med(bare.map((b) => b.replyMs));
    const bareCycleMs = med(bare.map((b) => b.cycleMs));
    return {
      scenario: 'docker',
      runs,
      bareReplyMedianMs: Math.round(bareReply),
      bareCycleMedianMs: Math.round(bareCycleMs),
      gatedReplyMedianMs: Math.round(med(gatedReply)),
      gatedCycleMedianMs: Math.round(med(gatedCycle)),
      replyRatio: Math.round((med(gatedReply) / bareReply) * 100) / 100,
      cycleRatio: Math.round((med(gatedCycle) / bareCycleMs) * 100) / 100,
    };
  } finally {
    await dockerd.stop();
  }
}

/**
 * `runs` one-message runs in a row through a real gated on the docker or swarm runtime (one warm-up run
 * first): per run, ingest → reply delivered and ingest → run ended, in ms; and each run's id and ingest time
 * (epoch ms), by which bench/swarm.ts places the engine's events of that run. Each run is a new group's
 * first, unless `sameGroup`: then every run is the next one of one group (a conversation), its message sent
 * `gapMs` after the previous run ended (a person answering). `env`: more settings (GATED_SWARM_SPARES).
 */
export async function gatedCycles(
  kind: 'docker' | 'swarm',
  host: string,
  image: string,
  runs: number,
  opts: { sameGroup?: boolean; gapMs?: number; env?: Record<string, string> } = {},
) {
  const inst = await benchInstance({
    groups: runs + 1,
    maxConcurrent: 1,
    idleMs: 0,
    runtime: { kind, host, image },
    ...(opts.env ? { env: opts.env } : {}),
  });
  const reply: number[] = [];
  const cycle: number[] = [];
  const traced: Array<{ runId: number; ingestAt: number; cycleMs: number }> = [];
  try {
    const one = async (g: number, tok: number) => {
      const ingestAt = Date.now();
      const t0 = performance.now();
      const chat = `bench:g${opts.sameGroup ? 0 : g}`;
      const id = inst.channel.sink!({ chat_jid: chat, sender: 'bench', content: `tok-${tok}` })!;
      await inst.channel.waitFor(tok + 1, 120_000);
      const replyMs = performance.now() - t0;
      const ended = () =>
        inst.gated.db
          .prepare(`SELECT s.ended_at FROM messages m JOIN session_log s ON s.id = m.run_id WHERE m.id = ?`)
          .pluck()
          .get(id);
      while (!ended()) await new Promise((r) => setTimeout(r, 5));
      const cycleMs = performance.now() - t0;
      const runId = inst.gated.db.prepare(`SELECT run_id FROM messages WHERE id = ?`).pluck().get(id);
      return { replyMs, cycleMs, runId: runId as number, ingestAt };
    };
    await one(runs, 0);
    for (let i = 0; i < runs; i++) {
      if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      const r = await one(i, i + 1);
      reply.push(r.replyMs);
      cycle.push(r.cycleMs);
      traced.push({ runId: r.runId, ingestAt: r.ingestAt, cycleMs: r.cycleMs });
    }
  } finally {
    await inst.close();
  }
  return { reply, cycle, traced };
}
