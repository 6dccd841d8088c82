/**
 * A swarm run's service made ahead of the run. A swarm takes a fixed ~150 ms between a service's create and
 * its task reaching the node (the scheduler waits 50 ms after the store's last change, the dispatcher 100 ms
 * after a node's last assignment change; neither is a setting), so a run whose service is created when its
 * message arrives always answers that much later than a plain container. A spare moves that wait out of
 * the reply path: when a run of a lane (a group and topic) ends, the runtime creates the service of that
 * lane's next run, with the same spec, and its task starts and waits on stdin; the lane's next run takes it.
 *
 * What does not change: one container per run (a spare serves one run, then it is removed like any run's
 * service), the same lockdown and mounts (a spare is only taken by a run whose service spec is identical),
 * nothing secret in it (input, secrets included, arrives on stdin once the run owns it). What it costs: an
 * idle container per lane that ran recently, at most `max` of them, each removed after `idleMs` unused, at
 * close, or (after a crash) by the next sweep of the instance's services.
 */

/** A spare being started or started: its service spec, without the run's own labels, and its launch. */
interface Spare<T> {
  /** The service spec it was made with (labels and name left out); a run with another spec cannot take it. */
  key: string;
  /** Resolves once its task's container started; rejects when it could not start (its service is removed). */
  launched: Promise<T>;
  timer: NodeJS.Timeout;
}

/** The spares of one runtime, at most one per lane. */
export class SparePool<T> {
  private readonly lanes = new Map<string, Spare<T>>();
  private seq = 0;
  private closed = false;

  /**
   * @param max spares kept at once (0: none).
   * @param idleMs how long a spare waits for its run before it is removed.
   * @param discard removes a spare that will not be used (its launch settled).
   */
  constructor(
    private readonly max: number,
    private readonly idleMs: number,
    private readonly discard: (launched: T) => Promise<void>,
  ) {}

  /** How many spares exist (started or starting). */
  get size(): number {
    return this.lanes.size;
  }

  /**
   * The lane's spare for a run whose spec is `key`, taken out of the pool; undefined when there is none, or
   * when it was made for another spec (then it is discarded).
   */
  take(lane: string, key: string): Promise<T> | undefined {
    const spare = this.lanes.get(lane);
    if (!spare) return undefined;
    this.lanes.delete(lane);
    clearTimeout(spare.timer);
    if (spare.key === key) return spare.launched;
    void this.drop(spare);
    return undefined;
  }

  /**
   * Makes a spare for `lane` with `launch(n)` (n numbers the spares of this pool) unless the lane has one or
   * the pool is full. Never throws: a spare that fails to start is forgotten (its launch removed its service).
   */
  offer(lane: string, key: string, launch: (n: number) => Promise<T>): void {
    if (this.closed || this.lanes.has(lane) || this.lanes.size >= this.max) return;
    const n = ++this.seq;
    // A launch that throws at once (the group's folder is gone) is a spare that failed, like any other.
    const launched = (async () => launch(n))();
    const spare: Spare<T> = {
      key,
      launched,
      timer: setTimeout(() => {
        if (this.lanes.get(lane) !== spare) return;
        this.lanes.delete(lane);
        void this.drop(spare);
      }, this.idleMs),
    };
    spare.timer.unref();
    this.lanes.set(lane, spare);
    launched.catch(() => {
      if (this.lanes.get(lane) !== spare) return;
      this.lanes.delete(lane);
      clearTimeout(spare.timer);
    });
  }

  /** Removes every spare and makes no more; resolves when their services are removed. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.lanes.values()];
    this.lanes.clear();
    await Promise.all(all.map((s) => this.drop(s)));
  }

  private async drop(spare: Spare<T>): Promise<void> {
    clearTimeout(spare.timer);
    const launched = await spare.launched.catch(() => undefined);
    if (launched !== undefined) await this.discard(launched).catch(() => undefined);
  }
}
