/**
 * Impulse configuration of a route (docs/ROUTING.md): how much each verb weighs, the threshold at which a
 * chat's held messages are released, and the longest any message is held.
 */
export interface ImpulseConfig {
  threshold: number;
  weights: Readonly<Record<string, number>>;
  /** Weight of a verb not named in `weights`. */
  defaultWeight: number;
  maxHoldMs: number;
}

/** The defaults: threshold 100; reaction/typing/join/edit/delete weigh 0, every other verb 100; 5 min hold. */
export const DEFAULT_IMPULSE: ImpulseConfig = Object.freeze({
  threshold: 100,
  weights: Object.freeze({ reaction: 0, typing: 0, join: 0, edit: 0, delete: 0 }),
  defaultWeight: 100,
  maxHoldMs: 5 * 60_000,
});

/** The weight of `verb` under `cfg`. */
export function weightOf(cfg: ImpulseConfig, verb: string): number {
  return Object.hasOwn(cfg.weights, verb) ? cfg.weights[verb]! : cfg.defaultWeight;
}

const nonNegInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Parses a route's impulse_config JSON (`{"threshold":300,"weights":{"follow":10},"max_hold_ms":60000}`,
 * every field optional, weights merged over the defaults). NULL or empty means the defaults. Returns the
 * merged config, or the reason it is invalid (the caller then uses the defaults and reports it).
 */
export function parseImpulseConfig(raw: string | null | undefined): ImpulseConfig | { error: string } {
  if (raw === null || raw === undefined || raw.trim() === '') return DEFAULT_IMPULSE;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return { error: 'impulse_config is not valid JSON' };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { error: 'impulse_config must be a JSON object' };
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!['threshold', 'weights', 'max_hold_ms'].includes(k))
      return { error: `impulse_config: unknown field '${k}'` };
  }
  if (o.threshold !== undefined && !nonNegInt(o.threshold)) {
    return { error: 'impulse_config.threshold must be a non-negative integer' };
  }
  if (o.max_hold_ms !== undefined && !nonNegInt(o.max_hold_ms)) {
    return { error: 'impulse_config.max_hold_ms must be a non-negative integer' };
  }
  const weights: Record<string, number> = { ...DEFAULT_IMPULSE.weights };
  if (o.weights !== undefined) {
    if (typeof o.weights !== 'object' || o.weights === null || Array.isArray(o.weights)) {
      return { error: 'impulse_config.weights must be an object of verb → weight' };
    }
    for (const [verb, w] of Object.entries(o.weights)) {
      if (!nonNegInt(w)) return { error: `impulse_config.weights.${verb} must be a non-negative integer` };
      weights[verb] = w;
    }
  }
  return {
    threshold: (o.threshold as number | undefined) ?? DEFAULT_IMPULSE.threshold,
    weights,
    defaultWeight: DEFAULT_IMPULSE.defaultWeight,
    maxHoldMs: (o.max_hold_ms as number | undefined) ?? DEFAULT_IMPULSE.maxHoldMs,
  };
}
