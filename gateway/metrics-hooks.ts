import type { Message } from '../core/types.js';

/** The counters the gateway pipeline reports to; core/metrics.ts provides the Prometheus-backed one. */
export interface GatewayMetrics {
  messageIn(msg: Pick<Message, 'chat_jid' | 'verb'>): void;
  routed(target: string): void;
  unrouted(): void;
  pollTick(seconds: number): void;
  /** A row ended `failed` because processing it threw (`stage`: gateway or queue). */
  rowFailed?(stage: string): void;
}
