// Asks a gated's /healthz every `everyMs` from a process of its own, as a supervisor or a load balancer
// would, until its stdin ends; then prints {"latencies":[...],"failed":N} on stdout. Plain JavaScript on
// bare node: nothing of gated is loaded, so the answer's wait is gated's alone, not this process's.
const [url, everyArg] = process.argv.slice(2);
const everyMs = Number(everyArg ?? 50);
const latencies = [];
let failed = 0;
let stopped = false;
process.stdin.on('data', () => undefined);
process.stdin.on('end', () => (stopped = true));
while (!stopped) {
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
process.stdout.write(JSON.stringify({ latencies, failed }) + '\n');
