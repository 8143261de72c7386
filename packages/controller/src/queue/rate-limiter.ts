import type { Clock } from '../clock.js';

/**
 * Rate limiters with client-go `util/workqueue` semantics: `when(item)` says how long to wait
 * before the item may be processed again, `forget(item)` resets the item's history.
 */
export interface RateLimiter<K> {
  when(item: K): number;
  forget(item: K): void;
  numRequeues(item: K): number;
}

/** base x 2^failures, capped at max; per item. */
export class ItemExponentialFailureRateLimiter<K> implements RateLimiter<K> {
  private readonly failures = new Map<K, number>();

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
  ) {}

  when(item: K): number {
    const exp = this.failures.get(item) ?? 0;
    this.failures.set(item, exp + 1);
    const backoff = this.baseMs * 2 ** exp;
    return Number.isFinite(backoff) && backoff < this.maxMs ? backoff : this.maxMs;
  }

  forget(item: K): void {
    this.failures.delete(item);
  }

  numRequeues(item: K): number {
    return this.failures.get(item) ?? 0;
  }
}

/**
 * A global token bucket (golang.org/x/time/rate Reserve semantics): `burst` tokens, refilled at
 * `qps` per second; a call without a token reserves the next one and waits for it.
 */
export class BucketRateLimiter<K> implements RateLimiter<K> {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly clock: Pick<Clock, 'now'>,
  ) {
    this.tokens = burst;
    this.last = clock.now();
  }

  when(_item: K): number {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.qps) * 1000);
  }

  forget(_item: K): void {}

  numRequeues(_item: K): number {
    return 0;
  }
}

/** The longest wait of several limiters (client-go MaxOfRateLimiter). */
export class MaxOfRateLimiter<K> implements RateLimiter<K> {
  private readonly limiters: RateLimiter<K>[];

  constructor(...limiters: RateLimiter<K>[]) {
    this.limiters = limiters;
  }

  when(item: K): number {
    return Math.max(0, ...this.limiters.map((l) => l.when(item)));
  }

  forget(item: K): void {
    for (const l of this.limiters) l.forget(item);
  }

  numRequeues(item: K): number {
    return Math.max(0, ...this.limiters.map((l) => l.numRequeues(item)));
  }
}

export interface ControllerRateLimiterOptions {
  /** Per-item backoff after a failed reconcile: base x 2^n ... */
  baseMs?: number;
  /** ... capped here. */
  maxMs?: number;
  /** Overall retry rate across all items. */
  qps?: number;
  burst?: number;
}

/** client-go DefaultControllerRateLimiter: max(5ms x 2^n capped at 1000s, 10 qps / 100 burst). */
export function controllerRateLimiter<K>(clock: Pick<Clock, 'now'>, opts: ControllerRateLimiterOptions = {}): RateLimiter<K> {
  return new MaxOfRateLimiter<K>(
    new ItemExponentialFailureRateLimiter<K>(opts.baseMs ?? 5, opts.maxMs ?? 1_000_000),
    new BucketRateLimiter<K>(opts.qps ?? 10, opts.burst ?? 100, clock),
  );
}
