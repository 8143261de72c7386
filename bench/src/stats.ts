/** Percentiles by the nearest-rank method (p in 0..100) over values in any order. */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

export interface Distribution {
  n: number;
  p50?: number;
  p95?: number;
  p99?: number;
  max?: number;
  min?: number;
  mean?: number;
}

/** p50/p95/p99/max (and min, mean) of samples in milliseconds, rounded to 1 ms. */
export function distribution(values: readonly number[]): Distribution {
  const r = (x: number | undefined) => (x === undefined ? undefined : Math.round(x));
  if (values.length === 0) return { n: 0 };
  return {
    n: values.length,
    min: r(Math.min(...values)),
    p50: r(percentile(values, 50)),
    p95: r(percentile(values, 95)),
    p99: r(percentile(values, 99)),
    max: r(Math.max(...values)),
    mean: r(values.reduce((a, b) => a + b, 0) / values.length),
  };
}

export function median(values: readonly number[]): number | undefined {
  return percentile(values, 50);
}
