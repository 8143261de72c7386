import type { Logger } from '@kube-node-ready/core';
import { errorMessage, TerminalError } from '@kube-node-ready/core';
import type { Clock } from '../clock.js';
import { WriteFencedError } from '../kube/fence.js';
import type { WorkQueue } from '../queue/workqueue.js';

/**
 * The queue workers (controller-runtime's processNextWorkItem): each takes a key, reconciles it,
 * and then
 *   - on success forgets the key's error backoff and, if asked, re-adds it after requeueAfterMs;
 *   - on a conflict (`requeue`: a write refused because the object changed) re-adds it
 *     rate-limited, quietly: keeping its backoff, as controller-runtime does for Result{Requeue};
 *   - on a TerminalError logs it and drops the key (no retry); a WriteFencedError (leadership
 *     lost) drops it quietly;
 *   - on any other error re-adds it rate-limited (per-key exponential backoff).
 */
export interface Reconciler {
  reconcile(key: string): Promise<{ requeueAfterMs?: number; requeue?: boolean }>;
}

export interface RunnerObserver {
  reconciled?(result: 'success' | 'error', seconds: number): void;
  failed?(): void;
}

export interface RunWorkersOptions {
  queue: WorkQueue<string>;
  reconciler: Reconciler;
  workers: number;
  clock: Clock;
  log: Logger;
  observer?: RunnerObserver;
}

/** Resolves when the queue is shut down and every worker has finished its current key. */
export async function runWorkers(opts: RunWorkersOptions): Promise<void> {
  await Promise.all(Array.from({ length: opts.workers }, () => worker(opts)));
}

async function worker(opts: RunWorkersOptions): Promise<void> {
  const { queue, reconciler, clock, log, observer } = opts;
  for (;;) {
    const key = await queue.get();
    if (key === undefined) return;
    const started = clock.now();
    try {
      const result = await reconciler.reconcile(key);
      observer?.reconciled?.('success', (clock.now() - started) / 1000);
      if (result.requeue) queue.addRateLimited(key);
      else {
        queue.forget(key);
        if (result.requeueAfterMs !== undefined) queue.addAfter(key, result.requeueAfterMs);
      }
    } catch (err) {
      observer?.reconciled?.('error', (clock.now() - started) / 1000);
      if (err instanceof WriteFencedError) {
        log.info({ key, err: errorMessage(err) }, 'reconcile abandoned: this replica may no longer write');
        queue.forget(key);
      } else if (err instanceof TerminalError) {
        log.error({ key, err: errorMessage(err) }, 'reconcile failed for good; not retrying');
        queue.forget(key);
      } else {
        observer?.failed?.();
        log.warn({ key, err: errorMessage(err), retries: queue.numRequeues(key) }, 'reconcile failed; retrying with backoff');
        queue.addRateLimited(key);
      }
    } finally {
      queue.done(key);
    }
  }
}
