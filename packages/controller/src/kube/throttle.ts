import type { Clock, Timer } from '../clock.js';

/**
 * The client-side rate limit of API calls (kubernetes.qps, kubernetes.burst): a token bucket whose
 * waiters are served by priority, then in arrival order. When a burst of nodes joins, the calls
 * that open a node whose worker has passed go before the calls that launch more workers, so the
 * latency from "worker finished" to "taint removed" stays short while launches queue.
 */
export const Priority = {
  /** Writes that record a finished attempt (open the node, store the outcome). */
  High: 0,
  Normal: 1,
} as const;
export type Priority = (typeof Priority)[keyof typeof Priority];

interface Waiter {
  priority: Priority;
  seq: number;
  resolve: () => void;
}

export class PriorityTokenBucket {
  private tokens: number;
  private last: number;
  private seq = 0;
  private readonly waiters: Waiter[] = [];
  private timer: Timer | undefined;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly clock: Clock,
  ) {
    this.tokens = burst;
    this.last = clock.now();
  }

  /** Resolves when the caller may make one call. */
  acquire(priority: Priority = Priority.Normal): Promise<void> {
    this.refill();
    if (this.waiters.length === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.waiters.push({ priority, seq: this.seq++, resolve });
      this.schedule();
    });
  }

  /** Callers waiting for a token. */
  get waiting(): number {
    return this.waiters.length;
  }

  private refill(): void {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }

  private schedule(): void {
    if (this.timer || this.waiters.length === 0) return;
    const ms = Math.max(0, Math.ceil(((1 - this.tokens) / this.qps) * 1000));
    this.timer = this.clock.setTimer(ms, () => {
      this.timer = undefined;
      this.refill();
      while (this.tokens >= 1 && this.waiters.length > 0) {
        this.tokens -= 1;
        this.next().resolve();
      }
      this.schedule();
    });
  }

  /** Removes and returns the waiter to serve: lowest priority value, then earliest. */
  private next(): Waiter {
    let best = 0;
    for (let i = 1; i < this.waiters.length; i++) {
      const w = this.waiters[i] as Waiter;
      const b = this.waiters[best] as Waiter;
      if (w.priority < b.priority || (w.priority === b.priority && w.seq < b.seq)) best = i;
    }
    return this.waiters.splice(best, 1)[0] as Waiter;
  }
}
