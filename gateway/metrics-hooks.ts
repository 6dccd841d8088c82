import type { Metrics } from '../core/metrics.js';

/** The counters the gateway reports to (core/metrics.ts, Prometheus): messages in, routing, ticks, failures. */
export type GatewayMetrics = Pick<Metrics, 'messagesIn' | 'routed' | 'unrouted' | 'pollTick'> &
  Partial<Pick<Metrics, 'rowFailed'>>;
