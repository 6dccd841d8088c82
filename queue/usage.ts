import type { UsageReport, UsageStore } from '../store/usage.js';
import type { BlockUsage } from './protocol/parser.js';
import type { Run } from './run.js';

/**
 * A block's usage as it is stored (docs/COSTS.md): credited to `sender` (the sender of the turn it belongs
 * to), its cost the agent's own, else the tokens priced by the model's `model_prices` row (or '*'), else 0.
 */
export function usageReport(
  store: UsageStore,
  run: Run,
  usage: BlockUsage,
  sender: string | null,
  at: number,
): UsageReport {
  const model = usage.model ?? null;
  const cost = usage.cost_usd ?? store.price(model, usage.input_tokens, usage.output_tokens) ?? 0;
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
