import { DeliveryError } from '../../core/errors.js';
import type { Channel, SendPart } from '../../channels/channel.js';

/**
 * A platform stand-in for delivery tests: records every part it accepts and fails or holds sends as the
 * test scripts it. Delivery (the code under test) is real; only the far side of the wire is scripted.
 */
export class ScriptChannel implements Channel {
  readonly limitUnit = 'chars' as const;
  readonly accepted: SendPart[] = [];
  /** Every call to send, accepted or not, in order. */
  readonly calls: SendPart[] = [];
  private readonly script: Array<DeliveryError | Promise<void> | 'ok'> = [];

  constructor(
    readonly platform = 'test',
    readonly limit = 4096,
  ) {}

  async start(): Promise<void> {}
  async stop(): Promise<void> {}

  /** The next `n` sends throw `err`. */
  failNext(err: DeliveryError, n = 1): void {
    for (let i = 0; i < n; i += 1) this.script.push(err);
  }

  /** The next `n` sends are accepted (so that failures scripted after them hit a later part). */
  acceptNext(n: number): void {
    for (let i = 0; i < n; i += 1) this.script.push('ok');
  }

  /** The next send waits until the returned function is called, then is accepted. */
  hold(): () => void {
    let release!: () => void;
    this.script.push(new Promise<void>((r) => (release = r)));
    return release;
  }

  async send(part: SendPart): Promise<string | null> {
    this.calls.push(part);
    const step = this.script.shift();
    if (step instanceof DeliveryError) throw step;
    if (step instanceof Promise) await step;
    this.accepted.push(part);
    return `${this.platform}-${this.accepted.length}`;
  }

  /** The texts accepted for one chat, in order. */
  texts(chatJid: string): string[] {
    return this.accepted.filter((p) => p.chatJid === chatJid).map((p) => p.text);
  }
}

/** A Sleep the test controls: every wait is recorded and resolves when released (or at once when auto). */
export function manualSleep(auto = false) {
  const waits: Array<{ ms: number; release: () => void; done: boolean }> = [];
  let onWait: (() => void) | undefined;
  const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
    new Promise<void>((resolve) => {
      const w = { ms, done: false, release: () => ((w.done = true), resolve()) };
      waits.push(w);
      signal.addEventListener('abort', w.release, { once: true });
      if (auto) w.release();
      onWait?.();
    });
  /** Resolves once at least `n` waits have started. */
  const waitedTimes = (n: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (waits.length >= n) {
          onWait = undefined;
          resolve();
        }
      };
      onWait = check;
      check();
    });
  return { sleep, waits, waitedTimes };
}
