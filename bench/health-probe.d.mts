/** Types of bench/health-probe.mjs (plain JavaScript, so that it also runs on bare node). */
export function probeHealth(
  url: string,
  everyMs: number,
  stopped: () => boolean,
): Promise<{ latencies: number[]; failed: number }>;
