import type { Clock, Timer } from '../clock.js';
import { controllerRateLimiter, type RateLimiter } from './rate-limiter.js';

/**
 * A work queue with client-go `util/workqueue` semantics:
 *
 *   - an item is queued at most once (dirty set), however often it is added;
 *   - two lines: items added as 'high' are handed out before the 'normal' ones (each line first in,
 *     first out), and an item queued as normal and added again as high moves up (controller-runtime's
 *     priority queue does the same);
 *   - an item being processed is never handed to a second worker: adds during processing are
 *     remembered and the item is queued again when the worker calls done();
 *   - addAfter() delays an add (the earliest of several delays wins), on the injected clock;
 *   - addRateLimited() delays by the rate limiter (per-item exponential backoff and a global
 *     token bucket); forget() resets an item's backoff once it was processed successfully;
 *   - shutDown() stops accepting items; items already queued are still handed out, and
 *     shutDownWithDrain() resolves once every handed-out item is done; abandon() drops them.
 */
export interface QueueObserver {
  /** Called whenever the number of queued (not yet handed out) items changes. */
  depth?(n: number): void;
  /** Called as an item is handed out, with how long it was queued (ms): client-go's queue duration. */
  waited?(ms: number): void;
  added?(): void;
  retried?(): void;
}

/** Which line an add joins: 'high' items are handed out before 'normal' ones. */
export type QueuePriority = 'high' | 'normal';

export interface WorkQueueOptions<K> {
  clock: Clock;
  rateLimiter?: RateLimiter<K>;
  observer?: QueueObserver;
}

export class WorkQueue<K = string> {
  private readonly clock: Clock;
  private readonly limiter: RateLimiter<K>;
  private readonly observer: QueueObserver;

  /** The lines of items ready to be handed out, high first. An entry is live while lineOf names it. */
  private lines: Record<QueuePriority, Array<{ item: K; entry: number }>> = { high: [], normal: [] };
  /** Where each queued item waits (an item that moved up left an entry behind, skipped when reached). */
  private readonly lineOf = new Map<K, { entry: number; priority: QueuePriority }>();
  private entries = 0;
  /** Items re-added while being processed: the line they go to when done. */
  private readonly requeueAs = new Map<K, QueuePriority>();
  /** Items that need processing (queued, or re-added while being processed). */
  private readonly dirty = new Set<K>();
  /** Items handed out and not yet done. */
  private readonly processing = new Set<K>();
  /** Delayed adds: the earliest due time per item. */
  private readonly waiting = new Map<K, { at: number; timer: Timer }>();
  /** When each queued item was queued (by add, or again by done). */
  private readonly queuedAt = new Map<K, number>();
  private getters: Array<(item: K | undefined) => void> = [];
  private drainWaiters: Array<() => void> = [];
  private stopped = false;

  constructor(opts: WorkQueueOptions<K>) {
    this.clock = opts.clock;
    this.limiter = opts.rateLimiter ?? controllerRateLimiter<K>(opts.clock);
    this.observer = opts.observer ?? {};
  }

  add(item: K, priority: QueuePriority = 'normal'): void {
    if (this.stopped) return;
    if (this.dirty.has(item)) {
      if (priority === 'high') this.promote(item);
      return;
    }
    this.observer.added?.();
    this.dirty.add(item);
    if (this.processing.has(item)) {
      // queued again by done()
      if (priority === 'high') this.requeueAs.set(item, 'high');
      return;
    }
    this.enqueue(item, priority);
  }

  addAfter(item: K, delayMs: number): void {
    if (this.stopped) return;
    if (delayMs <= 0) return this.add(item);
    const at = this.clock.now() + delayMs;
    const existing = this.waiting.get(item);
    if (existing && existing.at <= at) return;
    existing?.timer.cancel();
    const timer = this.clock.setTimer(delayMs, () => {
      this.waiting.delete(item);
      this.add(item);
    });
    this.waiting.set(item, { at, timer });
  }

  addRateLimited(item: K): void {
    this.observer.retried?.();
    this.addAfter(item, this.limiter.when(item));
  }

  forget(item: K): void {
    this.limiter.forget(item);
  }

  numRequeues(item: K): number {
    return this.limiter.numRequeues(item);
  }

  /** The next item, once one is queued; undefined when the queue is shut down and empty. */
  get(): Promise<K | undefined> {
    const item = this.take();
    if (item !== undefined || this.stopped) return Promise.resolve(item);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  done(item: K): void {
    this.processing.delete(item);
    const priority = this.requeueAs.get(item) ?? 'normal';
    this.requeueAs.delete(item);
    if (this.dirty.has(item)) this.enqueue(item, priority);
    else if (this.stopped && this.processing.size === 0 && this.lineOf.size === 0) this.notifyDrained();
  }

  /** Queued items, not counting delayed or in-process ones (client-go Len). */
  len(): number {
    return this.lineOf.size;
  }

  /** Items handed out and not yet done. */
  inProcess(): number {
    return this.processing.size;
  }

  /** Delayed adds not yet due. */
  delayed(): number {
    return this.waiting.size;
  }

  get shuttingDown(): boolean {
    return this.stopped;
  }

  shutDown(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const { timer } of this.waiting.values()) timer.cancel();
    this.waiting.clear();
    if (this.lineOf.size === 0) {
      const getters = this.getters;
      this.getters = [];
      for (const resolve of getters) resolve(undefined);
    }
    if (this.processing.size === 0 && this.lineOf.size === 0) this.notifyDrained();
  }

  /** Shuts down and drops every queued item: nothing more is handed out (leadership lost). */
  abandon(): void {
    this.lines = { high: [], normal: [] };
    this.lineOf.clear();
    this.requeueAs.clear();
    this.dirty.clear();
    this.queuedAt.clear();
    this.observer.depth?.(0);
    this.shutDown();
  }

  /** Shuts down, then resolves when every queued and handed-out item is done. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.processing.size === 0 && this.lineOf.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private enqueue(item: K, priority: QueuePriority): void {
    this.queuedAt.set(item, this.clock.now());
    const getter = this.getters.shift();
    if (getter) {
      this.handOut(item);
      getter(item);
      return;
    }
    this.line(item, priority);
    this.observer.depth?.(this.lineOf.size);
  }

  private line(item: K, priority: QueuePriority): void {
    const entry = ++this.entries;
    this.lines[priority].push({ item, entry });
    this.lineOf.set(item, { entry, priority });
  }

  /** A queued normal item goes to the end of the high line (its old entry is skipped when reached). */
  private promote(item: K): void {
    if (this.processing.has(item)) this.requeueAs.set(item, 'high');
    else if (this.lineOf.get(item)?.priority === 'normal') this.line(item, 'high');
  }

  private take(): K | undefined {
    for (const priority of ['high', 'normal'] as const) {
      const line = this.lines[priority];
      while (line.length > 0) {
        const { item, entry } = line.shift() as { item: K; entry: number };
        if (this.lineOf.get(item)?.entry !== entry) continue; // it moved up, or was handed out since
        this.lineOf.delete(item);
        this.observer.depth?.(this.lineOf.size);
        this.handOut(item);
        return item;
      }
    }
    return undefined;
  }

  private handOut(item: K): void {
    this.processing.add(item);
    this.dirty.delete(item);
    const at = this.queuedAt.get(item);
    this.queuedAt.delete(item);
    if (at !== undefined) this.observer.waited?.(this.clock.now() - at);
  }

  private notifyDrained(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
