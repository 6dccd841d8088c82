// Asks a gated's /healthz every `everyMs` until told to stop. Run as a program (node health-probe.mjs URL
// [everyMs]) it is a process of its own, as a supervisor or a load balancer would be: it asks until its
// stdin ends, then prints {"latencies":[...],"failed":N} on stdout. Plain JavaScript on bare node: nothing of
// gated is loaded, so the answer's wait is gated's alone. bench/pipeline.ts also asks from its own process.
import { argv } from 'node:process';
import { fileURLToPath } from 'node:url';

/**
 * Asks until `stopped()` is true; resolves with each answer's latency in ms (in order) and how many were not
 * a 200 (or not answered within 10 s).
 * @param {string} url @param {number} everyMs @param {() => boolean} stopped
 * @returns {Promise<{ latencies: number[], failed: number }>}
 */
export async function probeHealth(url, everyMs, stopped) {
  const latencies = [];
  let failed = 0;
  while (!stopped()) {
    const t = performance.now();
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
      if (res.status !== 200) failed += 1;
    } catch {
      failed += 1;
    }
    latencies.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return { latencies, failed };
}

if (argv[1] && fileURLToPath(import.meta.url) === argv[1]) {
  const [url, everyArg] = argv.slice(2);
  let stop = false;
  process.stdin.on('data', () => undefined);
  process.stdin.on('end', () => (stop = true));
  const r = await probeHealth(url, Number(everyArg ?? 50), () => stop);
  process.stdout.write(JSON.stringify(r) + '\n');
}
