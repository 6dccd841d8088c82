import type { UsageReport, UsageStore } from '../store/usage.js';
import type { BlockUsage } from './protocol/parser.js';
import type { Run } from './run.js';

/**
 * A block's usage as it is stored (docs/COSTS.md): credited to `sender` (the sender of the turn it belongs
 * to), its cost the agent's own, else the tokens priced by the model's `model_prices` row (or '*'), else 0.
 *
 * An agent may report a turn's tool calls' tokens without a cost and then the turn's whole cost with its
 * answer (the Claude agent: its SDK knows the cost only at the end): what gated priced of the turn's earlier
 * reports is taken off the answer's cost then, so the turn counts once. That report may add less than it
 * says, even less than nothing.
 */
const priced = new WeakMap<Run, number>();

export function usageReport(
  store: UsageStore,
  run: Run,
  usage: BlockUsage,
  sender: string | null,
  at: number,
  answers = false,
): UsageReport {
  const model = usage.model ?? null;
  const own = usage.cost_usd ?? null;
  let cost = own ?? store.price(model, usage.input_tokens, usage.output_tokens) ?? 0;
  if (answers) {
    if (own !== null) cost -= priced.get(run) ?? 0;
    priced.delete(run);
  } else if (own === null) {
    priced.set(run, (priced.get(run) ?? 0) + cost);
  }
  return {
    run_id: run.runId,
    group_folder: run.key.group,
    sender,
    model,
    at,
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
    cost_usd: cost,
  };
}
