import { sessionKeyId } from '../core/types.js';
import type { ReadyLane } from './queue-rows.js';
import type { Statements } from './queue-sql.js';

/** A cursor over the lanes to start: QueueStore.laneCursor, which says how they are chosen and read. */
export interface LaneCursor {
  /** The next lane to start, or undefined when there is none (or `limit` were given). */
  next(): ReadyLane | undefined;
}

/** The lanes to start, read as they are taken (QueueStore.laneCursor, store/queue.ts). */
export function laneCursor(
  s: Pick<Statements, 'walk' | 'firstIdle'>,
  now: number,
  skip: ReadonlySet<string>,
  limit: number,
  busy: ReadonlySet<string>,
): LaneCursor {
  const seen = new Set(skip);
  const excluded = [...busy];
  let given = 0;
  let walked: ReadyLane[] | undefined;
  const walk = (): ReadyLane[] => {
    const out: ReadyLane[] = [];
    // An iterator holds the connection: the walk is read whole, before anything is dispatched.
    for (const lane of s.walk.iterate({ now }) as Iterable<ReadyLane>) {
      if (given + out.length >= limit) break;
      const id = sessionKeyId(lane);
      if (seen.has(id)) continue;
      seen.add(id);
      out.push(lane);
    }
    return out.reverse();
  };
  return {
    next: (): ReadyLane | undefined => {
      if (given >= limit) return undefined;
      if (walked === undefined) {
        const lane = s.firstIdle.get({ now, busy: JSON.stringify(excluded) }) as ReadyLane | undefined;
        if (lane !== undefined) {
          seen.add(sessionKeyId(lane));
          excluded.push(lane.group);
          given++;
          return lane;
        }
        walked = walk();
      }
      const lane = walked.pop();
      if (lane !== undefined) given++;
      return lane;
    },
  };
}
