import type { Db } from './db.js';

/**
 * Usage per sender, group and day and the prices per model (docs/COSTS.md), one named statement per
 * operation, prepared once. Every usage report of a run is a `usage_reports` row credited to the sender of
 * the turn it belongs to; a report without a cost is priced by its model's `model_prices` row (or '*').
 */

/** One usage report as stored. */
export interface UsageReport {
  run_id: number;
  group_folder: string;
  sender: string | null;
  model: string | null;
  at: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

/** One row of `gated usage`: a day, a group and a sender with what they spent. */
export interface UsageRow {
  day: string;
  group_folder: string;
  sender: string | null;
  reports: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

/** The statements of usage and prices. */
export class UsageStore {
  private readonly s;

  constructor(db: Db) {
    this.s = {
      price: db.prepare(
        `SELECT input_per_mtok, output_per_mtok FROM model_prices WHERE model IN (?, '*')
         ORDER BY model = '*' LIMIT 1`,
      ),
      insert: db.prepare(
        `INSERT INTO usage_reports (run_id, group_folder, sender, model, at, input_tokens, output_tokens, cost_usd)
         VALUES (@run_id, @group_folder, @sender, @model, @at, @input_tokens, @output_tokens, @cost_usd)`,
      ),
      addToRun: db.prepare(
        `UPDATE session_log SET input_tokens = coalesce(input_tokens, 0) + @input_tokens,
           output_tokens = coalesce(output_tokens, 0) + @output_tokens, cost_usd = coalesce(cost_usd, 0) + @cost_usd
         WHERE id = @run_id`,
      ),
      prices: db.prepare('SELECT * FROM model_prices ORDER BY model'),
      setPrice: db.prepare(
        `INSERT INTO model_prices (model, input_per_mtok, output_per_mtok) VALUES (?, ?, ?)
         ON CONFLICT(model) DO UPDATE SET input_per_mtok = excluded.input_per_mtok,
           output_per_mtok = excluded.output_per_mtok`,
      ),
      removePrice: db.prepare('DELETE FROM model_prices WHERE model = ?'),
      byDay: db.prepare(
        `SELECT strftime('%Y-%m-%d', at / 1000, 'unixepoch') AS day, group_folder, sender, count(*) AS reports,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd
         FROM usage_reports WHERE at >= @since AND (@group IS NULL OR group_folder = @group)
         GROUP BY day, group_folder, sender ORDER BY day, group_folder, sender`,
      ),
    };
  }

  /** What `tokens` of `model` cost by its price row (or the '*' row); null without either. */
  price(model: string | null, inputTokens: number, outputTokens: number): number | null {
    const p = this.s.price.get(model ?? '*') as
      { input_per_mtok: number; output_per_mtok: number } | undefined;
    if (!p) return null;
    return (inputTokens * p.input_per_mtok + outputTokens * p.output_per_mtok) / 1e6;
  }

  /** Stores a report; `toRun` also adds it to the run's session_log row (a block that commits no usage). */
  record(r: UsageReport, toRun: boolean): void {
    this.s.insert.run(r);
    if (toRun) this.s.addToRun.run(r);
  }

  /** Every price row, by model. */
  prices(): Array<{ model: string; input_per_mtok: number; output_per_mtok: number }> {
    return this.s.prices.all() as Array<{ model: string; input_per_mtok: number; output_per_mtok: number }>;
  }

  /** Sets a model's prices (US dollars per million input and output tokens). */
  setPrice(model: string, input: number, output: number): void {
    this.s.setPrice.run(model, input, output);
  }

  /** Removes a model's price row; false when it had none. */
  removePrice(model: string): boolean {
    return this.s.removePrice.run(model).changes > 0;
  }

  /** Usage per UTC day, group and sender since `since`, of one group or all. */
  byDay(since: number, group: string | null): UsageRow[] {
    return this.s.byDay.all({ since, group }) as UsageRow[];
  }
}

const stores = new WeakMap<Db, UsageStore>();

/** The UsageStore of a database, made on first use. */
export function usageOf(db: Db): UsageStore {
  let s = stores.get(db);
  if (!s) stores.set(db, (s = new UsageStore(db)));
  return s;
}
