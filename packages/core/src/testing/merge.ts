/**
 * `base` with `override` laid over it: objects are merged key by key, anything else (scalars,
 * lists such as taints) is replaced. Neither input is changed. For configuration overrides in
 * tests, the fault suite and the bench.
 */
export function deepMerge(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const under = out[key];
    out[key] = isPlainObject(under) && isPlainObject(value) ? deepMerge(under, value) : value;
  }
  return out;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
