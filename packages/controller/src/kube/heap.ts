import type { Logger } from '@kube-node-ready/core';
import type { Clock, Timer } from '../clock.js';

/** How long after the last list in progress ends the heap is compacted. */
export const COMPACT_DELAY_MS = 2_000;

export interface HeapCompactorOptions {
  clock: Clock;
  log: Logger;
  /** V8's collector, present when Node.js runs with --expose-gc (the chart's NODE_OPTIONS); without it this does nothing. */
  gc: NodeJS.GCFunction | undefined;
  /** Process memory figures (process.memoryUsage in production). */
  memory?: () => { rss: number; heapTotal: number };
}

/**
 * Gives back the memory a full list grew. A list of 5000 Nodes passes some 75 MB of JSON through
 * the process page by page; V8 grows its heap for it and keeps that heap once the pages are garbage,
 * unless a collection that reduces memory runs. After a list,
 * once the caches have settled, one last-resort collection (the one V8 runs before it gives up on
 * an allocation: full, compacting, and it returns empty pages to the system) shrinks the heap to
 * what is live. It runs after lists only: they are rare (start-up, a 410, a restarted watch), and a
 * burst's allocations are short-lived, which the young generation handles. It waits until no cache
 * is listing: at start-up the Pods and NodeVerifications are listed long before the Nodes.
 */
export class HeapCompactor {
  private timer: Timer | undefined;
  /** The caches whose list is in progress (a failed list is listed again, so a set, not a count). */
  private readonly listing = new Set<string>();

  constructor(private readonly opts: HeapCompactorOptions) {}

  /** A cache starts a list: no compaction while it runs. */
  started(resource: string): void {
    if (!this.opts.gc) return;
    this.listing.add(resource);
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** A cache has applied its list: compact COMPACT_DELAY_MS after the last list in progress ends. */
  listed(resource: string): void {
    if (!this.opts.gc) return;
    this.listing.delete(resource);
    this.timer?.cancel();
    this.timer = this.listing.size === 0 ? this.opts.clock.setTimer(COMPACT_DELAY_MS, () => this.compact()) : undefined;
  }

  stop(): void {
    this.timer?.cancel();
  }

  private compact(): void {
    const gc = this.opts.gc;
    if (!gc) return;
    const memory = this.opts.memory ?? (() => process.memoryUsage());
    const before = memory();
    const started = performance.now();
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    const after = memory();
    const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
    this.opts.log.info(
      { ms: Math.round(performance.now() - started), heapMiB: mib(after.heapTotal), heapFreedMiB: mib(before.heapTotal - after.heapTotal), rssMiB: mib(after.rss), rssFreedMiB: mib(before.rss - after.rss) },
      'heap compacted after a list',
    );
  }
}
