/** One Server-Sent Event as the wire carried it. */
export interface SseEvent {
  event: string;
  data: string;
  /** The `id:` field, if this event had one. */
  id: string | undefined;
}

/**
 * A minimal SSE reader over fetch for tests (Node 20 has no EventSource): parses the stream as the
 * HTML spec does (event/data/id fields, blank line ends an event, `:` comments ignored) and hands events
 * out in order. The browser test exercises the real EventSource.
 */
export class SseClient {
  readonly events: SseEvent[] = [];
  private waiters: Array<() => void> = [];
  private readonly abort = new AbortController();
  private ended = false;
  status = 0;
  comments = 0;

  private constructor(private readonly url: string) {}

  /** Connects and resolves once the response headers arrived. */
  static async open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const c = new SseClient(url);
    const res = await fetch(url, {
      headers: { Accept: 'text/event-stream', ...headers },
      signal: c.abort.signal,
    });
    c.status = res.status;
    if (!res.ok || !res.body) throw new Error(`SSE ${url} answered ${res.status}: ${await res.text()}`);
    void c.pump(res.body);
    return c;
  }

  private async pump(body: ReadableStream<Uint8Array>) {
    const decoder = new TextDecoder();
    let buf = '';
    let cur: { event: string; data: string[]; id: string | undefined } = {
      event: 'message',
      data: [],
      id: undefined,
    };
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (line === '') {
            if (cur.data.length)
              this.events.push({ event: cur.event, data: cur.data.join('\n'), id: cur.id });
            cur = { event: 'message', data: [], id: undefined };
            this.wake();
          } else if (line.startsWith(':')) this.comments += 1;
          else {
            const i = line.indexOf(':');
            const field = i < 0 ? line : line.slice(0, i);
            const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'event') cur.event = value;
            else if (field === 'data') cur.data.push(value);
            else if (field === 'id') cur.id = value;
          }
        }
      }
    } catch {
      // aborted by close()
    } finally {
      this.ended = true;
      this.wake();
    }
  }

  private wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Resolves on the next event or end of stream, or after `ms`. */
  private nextChange(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** True once the server ended the stream (or close() was called). */
  get done(): boolean {
    return this.ended;
  }

  /** Waits until `count` events of type `event` arrived; returns them. Fails after `timeoutMs`. */
  async waitFor(event: string, count: number, timeoutMs = 5000): Promise<SseEvent[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = this.events.filter((e) => e.event === event);
      if (got.length >= count) return got;
      if (this.ended)
        throw new Error(`stream ${this.url} ended with ${got.length}/${count} '${event}' events`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`timed out waiting for ${count} '${event}' events on ${this.url}, got ${got.length}`);
      await this.nextChange(left);
    }
  }

  /** Waits until the server ends the stream. */
  async waitEnd(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`stream ${this.url} did not end`);
      await this.nextChange(left);
    }
  }

  /** The id of the last event that carried one (what a browser sends back as Last-Event-ID). */
  lastEventId(): string | undefined {
    for (let i = this.events.length - 1; i >= 0; i--)
      if (this.events[i]!.id !== undefined) return this.events[i]!.id;
    return undefined;
  }

  /** Drops the connection. */
  close(): void {
    this.abort.abort();
  }
}
