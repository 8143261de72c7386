import type { Clock, Timer } from '../clock.js';

/**
 * The client-side rate limit of API calls (kubernetes.qps, kubernetes.burst): one token bucket for
 * every call made through KubeClient, Events included, whose waiters are served by priority, then in
 * arrival order. When a burst of nodes joins, the calls that open a node whose worker has passed go
 * before the calls that launch more workers, so the latency from "worker finished" to "taint
 * removed" stays short while launches queue; an Event never goes before a call that waits.
 */
export const Priority = {
  /** Writes that record a finished attempt (open the node, store the outcome). */
  High: 0,
  Normal: 1,
  /**
   * Best-effort calls (Events): served only when no call of a higher priority waits. While other
   * calls keep the budget busy they wait, and are sent once those are served.
   */
  BestEffort: 2,
} as const;
export type Priority = (typeof Priority)[keyof typeof Priority];

export class PriorityTokenBucket {
  private tokens: number;
  private last: number;
  /** Callers waiting for a token, one first-come-first-served line per priority (index: its value). */
  private readonly lines: Array<Array<() => void>> = Object.values(Priority).map(() => []);
  private queued = 0;
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
    if (this.queued === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      (this.lines[priority] as Array<() => void>).push(resolve);
      this.queued++;
      this.schedule();
    });
  }

  /** Callers waiting for a token. */
  get waiting(): number {
    return this.queued;
  }

  private refill(): void {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }

  private schedule(): void {
    if (this.timer || this.queued === 0) return;
    const ms = Math.max(0, Math.ceil(((1 - this.tokens) / this.qps) * 1000));
    this.timer = this.clock.setTimer(ms, () => {
      this.timer = undefined;
      this.refill();
      while (this.tokens >= 1 && this.queued > 0) {
        this.tokens -= 1;
        this.next()();
      }
      this.schedule();
    });
  }

  /**
   * Removes and returns the waiter to serve: the earliest of the most urgent line. (One list
   * searched for the best waiter cost time in proportion to the waiters: hundreds in a burst.)
   */
  private next(): () => void {
    const line = this.lines.find((l) => l.length > 0) as Array<() => void>;
    this.queued--;
    return line.shift() as () => void;
  }
}
