import { TerminalError } from '@kube-node-ready/core';

/**
 * A write refused because this replica may not write: it is not leading, or it has just lost
 * leadership. Never retried; the reconcile that made it is abandoned.
 */
export class WriteFencedError extends TerminalError {
  override name = 'WriteFencedError';
}

/**
 * Writes run only while `signal` has not aborted (KubeClient.fenceWrites: the leadership signal).
 * A write not sent yet is refused with a WriteFencedError, whether it waits for a rate-limit token
 * or for a retry, and the caller of one in flight gets that error at once instead of its answer. A
 * request sent before the abort may still be applied: it left while the Lease was ours, and the
 * Lease outlives the renew deadline by leaseDuration - renewDeadline, so no other leader acts yet.
 *
 * One abort listener however many writes are in flight: an AbortSignal keeps its listeners in a
 * list, so adding and removing one per write would cost time in proportion to the writes in flight.
 */
export class WriteFence {
  private readonly waiters = new Set<() => void>();

  constructor(readonly signal: AbortSignal) {
    signal.addEventListener('abort', () => {
      for (const waiter of this.waiters) waiter();
      this.waiters.clear();
    }, { once: true });
  }

  /**
   * Runs the write `what` under the fence. `attempts` makes the call with its retries and asks
   * `refuse` before each attempt is sent: an Error once the fence has closed, else false.
   */
  async run<T>(what: string, attempts: (refuse: () => Error | false) => Promise<T>): Promise<T> {
    const refused = (): WriteFencedError => new WriteFencedError(`${what} refused: this replica is not leading (leadership lost or not yet acquired)`);
    if (this.signal.aborted) throw refused();
    let unwatch: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      unwatch = this.watch(() => reject(refused()));
    });
    try {
      const running = attempts(() => this.signal.aborted && refused());
      running.catch(() => undefined); // once refused, how the request in flight ends concerns nobody
      return await Promise.race([running, aborted]);
    } finally {
      unwatch?.();
    }
  }

  /** Calls `onAbort` when the signal aborts, unless the returned function was called first. */
  private watch(onAbort: () => void): () => void {
    this.waiters.add(onAbort);
    return () => this.waiters.delete(onAbort);
  }
}
