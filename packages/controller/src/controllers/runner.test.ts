import { silentLogger, TerminalError } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { ItemExponentialFailureRateLimiter } from '../queue/rate-limiter.js';
import { WorkQueue } from '../queue/workqueue.js';
import { FakeClock, flushPromises } from '../testing/fake-clock.js';
import { runWorkers, type Reconciler } from './runner.js';

/** A recording reconciler: answers from a script per key, records every call. */
class ScriptedReconciler implements Reconciler {
  calls: string[] = [];
  running = new Set<string>();
  overlaps = 0;
  script = new Map<string, Array<{ requeueAfterMs?: number; requeue?: boolean } | Error>>();
  gate: Promise<void> | undefined;

  async reconcile(key: string): Promise<{ requeueAfterMs?: number; requeue?: boolean }> {
    this.calls.push(key);
    if (this.running.has(key)) this.overlaps++;
    this.running.add(key);
    try {
      if (this.gate) await this.gate;
      const next = this.script.get(key)?.shift() ?? {};
      if (next instanceof Error) throw next;
      return next;
    } finally {
      this.running.delete(key);
    }
  }
}

function setup(workers = 2) {
  const clock = new FakeClock();
  const queue = new WorkQueue<string>({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(100, 10_000) });
  const reconciler = new ScriptedReconciler();
  const results: string[] = [];
  let failures = 0;
  const done = runWorkers({
    queue,
    reconciler,
    workers,
    clock,
    log: silentLogger(),
    observer: { reconciled: (r) => results.push(r), failed: () => failures++ },
  });
  return { clock, queue, reconciler, done, results, failures: () => failures };
}

describe('runWorkers', () => {
  it('reconciles each added key and requeues after the time asked for', async () => {
    const { clock, queue, reconciler, done } = setup();
    reconciler.script.set('a', [{ requeueAfterMs: 5_000 }, {}]);
    queue.add('a');
    await flushPromises();
    expect(reconciler.calls).toEqual(['a']);
    await clock.advance(4_999);
    expect(reconciler.calls).toEqual(['a']);
    await clock.advance(1);
    expect(reconciler.calls).toEqual(['a', 'a']);
    await clock.advance(60_000);
    expect(reconciler.calls).toEqual(['a', 'a']); // no requeue asked the second time
    queue.shutDown();
    await done;
  });

  it('retries errors with growing per-key backoff, and forgets it after a success', async () => {
    const { clock, queue, reconciler, done, results, failures } = setup();
    reconciler.script.set('a', [new Error('boom'), new Error('boom'), {}, new Error('boom')]);
    queue.add('a');
    await flushPromises();
    await clock.advance(100); // first retry after 100 ms
    expect(reconciler.calls).toHaveLength(2);
    await clock.advance(199);
    expect(reconciler.calls).toHaveLength(2);
    await clock.advance(1); // second after 200 ms: success
    expect(reconciler.calls).toHaveLength(3);
    expect(queue.numRequeues('a')).toBe(0);
    queue.add('a');
    await flushPromises();
    await clock.advance(100); // back to the base delay
    expect(reconciler.calls).toHaveLength(5);
    expect(results.slice(0, 3)).toEqual(['error', 'error', 'success']);
    expect(failures()).toBe(3);
    queue.shutDown();
    await done;
  });

  it('a conflict (requeue) comes back rate-limited, backing off while it repeats, without counting as a failure', async () => {
    const { clock, queue, reconciler, done, results, failures } = setup();
    reconciler.script.set('a', [{ requeue: true }, { requeue: true }, {}]);
    queue.add('a');
    await flushPromises();
    await clock.advance(100);
    expect(reconciler.calls).toHaveLength(2);
    await clock.advance(199);
    expect(reconciler.calls).toHaveLength(2); // the backoff grows: not forgotten between conflicts
    await clock.advance(1);
    expect(reconciler.calls).toHaveLength(3);
    expect(queue.numRequeues('a')).toBe(0);
    expect(results).toEqual(['success', 'success', 'success']);
    expect(failures()).toBe(0);
    queue.shutDown();
    await done;
  });

  it('does not retry a TerminalError', async () => {
    const { clock, queue, reconciler, done } = setup();
    reconciler.script.set('a', [new TerminalError('bad node')]);
    queue.add('a');
    await flushPromises();
    await clock.advance(60_000);
    expect(reconciler.calls).toEqual(['a']);
    queue.shutDown();
    await done;
  });

  it('never reconciles one key on two workers at once; an event during a reconcile runs it once more after', async () => {
    const { queue, reconciler, done } = setup(4);
    let open!: () => void;
    reconciler.gate = new Promise((resolve) => (open = resolve));
    queue.add('a');
    await flushPromises();
    queue.add('a');
    queue.add('a');
    queue.add('b');
    await flushPromises();
    expect(reconciler.calls.sort()).toEqual(['a', 'b']);
    reconciler.gate = undefined;
    open();
    await flushPromises();
    expect(reconciler.calls.filter((k) => k === 'a')).toHaveLength(2);
    expect(reconciler.overlaps).toBe(0);
    queue.shutDown();
    await done;
  });

  it('finishes when the queue shuts down, after the keys in progress', async () => {
    const { queue, reconciler, done } = setup();
    let open!: () => void;
    reconciler.gate = new Promise((resolve) => (open = resolve));
    queue.add('a');
    await flushPromises();
    const drained = queue.shutDownWithDrain();
    let finished = false;
    void done.then(() => (finished = true));
    await flushPromises();
    expect(finished).toBe(false);
    open();
    await drained;
    await done;
    expect(finished).toBe(true);
  });
});
