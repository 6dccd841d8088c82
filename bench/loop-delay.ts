import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * How late the event loop runs a timer, in ms. Node's `monitorEventLoopDelay` records the whole interval
 * between two runs of its repeating timer, and that interval includes the timer's own period: an idle loop
 * shows about `resolutionMs` (10 ms), not 0. This takes the period off each figure, so that what is
 * reported is the lateness alone, the wait a timer or a request's callback sees.
 */
export interface LoopDelay {
  /** Percentile `p` (0–100) of the lateness since the monitor was made, in ms. */
  percentile(p: number): number;
  /** The greatest lateness since the monitor was made, in ms. */
  max(): number;
  /** Stops the monitor; what it measured stays readable. */
  stop(): void;
}

/** Starts measuring now, with a timer of period `resolutionMs`. */
export function monitorLoopDelay(resolutionMs = 10): LoopDelay {
  const h = monitorEventLoopDelay({ resolution: resolutionMs });
  h.enable();
  const late = (ns: number) => Math.max(0, ns / 1e6 - resolutionMs);
  return {
    percentile: (p) => late(h.percentile(p)),
    max: () => late(h.max),
    stop: () => h.disable(),
  };
}
