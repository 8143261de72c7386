import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import { withDeadline, type Clock, type Timer } from '../clock.js';
import type { WorkQueue } from '../queue/workqueue.js';
import { runWorkers, type Reconciler, type RunnerObserver } from './runner.js';

/**
 * What a controller registers with the manager (controller-runtime's SetupWithManager, Karpenter's
 * Register): its queue, reconciler and workers, and what it does when this replica starts and stops
 * leading. Its watches (handlers on the shared caches, with their filters) it sets up itself when it
 * is built, on every replica, so a follower's caches and observations are warm when it takes over.
 */
export interface Controller {
  /** For logs: "verification", "remediation". */
  name: string;
  queue: WorkQueue<string>;
  reconciler: Reconciler;
  workers: number;
  observer?: RunnerObserver;
  /** This replica leads: take over what the last leader left, queue the first keys. Runs before the workers start. */
  startLeading?(): Promise<void>;
  /** This replica no longer leads (lost, or given up by stop()); its queue is dropped or drained by the manager. */
  stopLeading?(): void;
  /** The safety-net resync (every reconciliation.resyncInterval, on every replica): queue what may have been missed. */
  resync?(): void;
  /** Housekeeping every few seconds while this replica leads. */
  tick?(): void;
}

/**
 * Runs the registered controllers' workers while this replica leads. Leadership lost: every queue is
 * dropped (nothing more is written; the client fences writes too). A stop: every queue is drained
 * first, so two leaders never act at once.
 */
export class Manager {
  private readonly controllers: Controller[] = [];
  private workers: Promise<void>[] = [];
  private resyncTimer: Timer | undefined;
  private leading = false;

  constructor(private readonly opts: { clock: Clock; log: Logger; resyncIntervalMs: number }) {}

  register(controller: Controller): void {
    this.controllers.push(controller);
  }

  /** Starts the resync timer (on every replica, leading or not). */
  start(): void {
    const resync = (): void => {
      for (const c of this.controllers) c.resync?.();
      this.resyncTimer = this.opts.clock.setTimer(this.opts.resyncIntervalMs, resync);
    };
    this.resyncTimer = this.opts.clock.setTimer(this.opts.resyncIntervalMs, resync);
  }

  /** The controllers' housekeeping, while this replica leads. */
  tick(): void {
    if (this.leading) for (const c of this.controllers) c.tick?.();
  }

  /** Each controller's startLeading(), in the order registered, then every controller's workers. */
  async lead(): Promise<void> {
    this.leading = true;
    for (const c of this.controllers) await c.startLeading?.();
    this.workers = this.controllers.map((c) =>
      runWorkers({
        queue: c.queue,
        reconciler: c.reconciler,
        workers: c.workers,
        clock: this.opts.clock,
        log: this.opts.log.child({ controller: c.name }),
        ...(c.observer ? { observer: c.observer } : {}),
      }),
    );
  }

  /** Leadership ended: stopLeading(), and the queued work is dropped (the reconciles running finish on fenced writes). Idempotent. */
  abandon(): void {
    this.leading = false;
    for (const c of this.controllers) {
      c.stopLeading?.();
      c.queue.abandon();
    }
  }

  /** Lets the reconciles in progress finish (at most `timeoutMs`), then waits for the workers to return. */
  async drain(timeoutMs: number): Promise<void> {
    const drained = Promise.all(this.controllers.map((c) => c.queue.shutDownWithDrain())).then(() => undefined);
    await withDeadline(this.opts.clock, drained, timeoutMs, 'queue drain timed out').catch((err: unknown) =>
      this.opts.log.warn({ err: errorMessage(err) }, 'stopping without waiting for the last reconciles'),
    );
    await this.finished();
  }

  /** Stops the resync timer (after drain() or abandon()). */
  stop(): void {
    this.resyncTimer?.cancel();
  }

  /** Resolves when every worker has returned (queues shut down or abandoned). */
  async finished(): Promise<void> {
    await Promise.all(this.workers);
  }
}
