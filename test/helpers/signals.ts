import { createSignals, type PartialText, type Signals } from '../../core/signals.js';

/**
 * Signals that record what a stage fired: the ids of outbound rows (delivery's wake) and the partial
 * texts (the drafts' input), so a test reads them instead of standing up delivery and drafts.
 */
export function recordingSignals(): { signals: Signals; outbound: number[]; partials: PartialText[] } {
  const signals = createSignals({
    error: ({ signal, err }) => console.error(`a listener of '${signal}' failed:`, err),
  });
  const outbound: number[] = [];
  const partials: PartialText[] = [];
  signals.outbound.on((id) => {
    if (id !== undefined) outbound.push(id);
  });
  signals.partial.on((p) => partials.push(p));
  return { signals, outbound, partials };
}
