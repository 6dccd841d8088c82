import type { Channel, InboundSink, SendPart } from '../channels/channel.js';

/**
 * The benchmark's platform (`bench:`): in-process, delivers instantly, and traces every token it is asked
 * to deliver: when it first arrived and how many times.
 */
export class BenchChannel implements Channel {
  readonly platform = 'bench';
  readonly limit = 1_000_000;
  readonly limitUnit = 'chars' as const;
  sink: InboundSink | undefined;
  /** token → delivery times (epoch ms); more than one entry is a duplicate. */
  readonly deliveries = new Map<string, number[]>();
  lastDelivery = 0;
  private waiters: Array<{ count: number; resolve: () => void }> = [];

  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
  }

  async stop(): Promise<void> {
    this.sink = undefined;
  }

  async send(part: SendPart): Promise<string | null> {
    this.record(part.text);
    return `b${part.messageId}.${part.part}`;
  }

  /** Traces the tokens of a text delivered now (a part sent, or a draft edited into the answer). */
  protected record(text: string): void {
    const now = Date.now();
    for (const tok of text.match(/tok-\d+/g) ?? []) {
      const list = this.deliveries.get(tok);
      if (list) list.push(now);
      else this.deliveries.set(tok, [now]);
    }
    this.lastDelivery = now;
    this.waiters = this.waiters.filter((w) => {
      if (this.deliveries.size < w.count) return true;
      w.resolve();
      return false;
    });
  }

  /** Resolves when `count` distinct tokens were delivered, or after `ms` (whichever first). */
  waitFor(count: number, ms: number): Promise<void> {
    if (this.deliveries.size >= count) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.waiters.push({
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }
}
