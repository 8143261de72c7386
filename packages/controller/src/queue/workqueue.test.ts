import { describe, expect, it } from 'vitest';
import { FakeClock, flushPromises } from '../testing/fake-clock.js';
import { BucketRateLimiter, controllerRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter } from './rate-limiter.js';
import { WorkQueue } from './workqueue.js';

function setup(opts: { limiter?: ConstructorParameters<typeof WorkQueue<string>>[0]['rateLimiter'] } = {}) {
  const clock = new FakeClock();
  const depths: number[] = [];
  const waits: number[] = [];
  const queue = new WorkQueue<string>({ clock, rateLimiter: opts.limiter, observer: { depth: (n) => depths.push(n), waited: (ms) => waits.push(ms) } });
  return { clock, queue, depths, waits };
}

/** Resolves what get() resolved to by now, or 'pending'. */
async function settled<T>(promise: Promise<T>): Promise<T | 'pending'> {
  let value: T | 'pending' = 'pending';
  void promise.then((v) => (value = v));
  await flushPromises(3);
  return value;
}

describe('WorkQueue: de-duplication and exclusivity', () => {
  it('queues an item once however often it is added, in FIFO order', async () => {
    const { queue } = setup();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(queue.len()).toBe(2);
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
    expect(queue.len()).toBe(0);
  });

  it('never hands an item being processed to a second worker; a re-add waits for done()', async () => {
    const { queue } = setup();
    queue.add('a');
    expect(await queue.get()).toBe('a');
    queue.add('a');
    queue.add('a');
    expect(queue.len()).toBe(0);
    const second = queue.get();
    expect(await settled(second)).toBe('pending');
    queue.done('a');
    expect(await settled(second)).toBe('a');
    queue.done('a');
    expect(queue.len()).toBe(0);
    expect(queue.inProcess()).toBe(0);
  });

  it('hands out high items before normal ones, each line in order; a queued normal item added as high moves up once', async () => {
    const { queue } = setup();
    queue.add('n1');
    queue.add('n2');
    queue.add('n3');
    queue.add('h1', 'high');
    queue.add('n2', 'high'); // moves up, behind h1
    queue.add('h1'); // a normal add does not move a high item down
    expect(queue.len()).toBe(4);
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push((await queue.get()) as string);
    expect(order).toEqual(['h1', 'n2', 'n1', 'n3']);
    expect(queue.len()).toBe(0);
    // n2's old place in the normal line is skipped, not handed out twice.
    queue.add('n4');
    expect(await queue.get()).toBe('n4');
    expect(await settled(queue.get())).toBe('pending');
  });

  it('an item added as high while being processed goes to the high line when done', async () => {
    const { queue } = setup();
    queue.add('a');
    expect(await queue.get()).toBe('a');
    queue.add('b');
    queue.add('a', 'high');
    queue.done('a');
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
  });

  it('with many workers, each item goes to exactly one of them', async () => {
    const { queue } = setup();
    const workers = [queue.get(), queue.get(), queue.get()];
    queue.add('a');
    queue.add('a');
    queue.add('b');
    const got = await Promise.all(workers.map(settled));
    expect(got.filter((g) => g === 'a')).toHaveLength(1);
    expect(got.filter((g) => g === 'b')).toHaveLength(1);
    expect(got.filter((g) => g === 'pending')).toHaveLength(1);
  });

  it('done() of an item without re-adds forgets it', async () => {
    const { queue } = setup();
    queue.add('a');
    await queue.get();
    queue.done('a');
    queue.add('a');
    expect(queue.len()).toBe(1);
  });

  it('reports its depth to the observer', async () => {
    const { queue, depths } = setup();
    queue.add('a');
    queue.add('b');
    await queue.get();
    expect(depths).toEqual([1, 2, 1]);
  });

  it('reports how long each item was queued, from the add (or the done that queued it again) to its hand-out', async () => {
    const { clock, queue, waits } = setup();
    queue.add('a');
    await clock.advance(300);
    queue.add('a'); // already queued: its wait still counts from the first add
    await clock.advance(200);
    expect(await queue.get()).toBe('a');
    queue.add('a'); // re-added while processed: queued again by done()
    await clock.advance(1000);
    queue.done('a');
    await clock.advance(50);
    expect(await queue.get()).toBe('a');
    const waiting = queue.get(); // a worker already waiting: no wait
    queue.add('b');
    expect(await waiting).toBe('b');
    expect(waits).toEqual([500, 50, 0]);
  });
});

describe('WorkQueue: delayed adds on the injected clock', () => {
  it('adds the item when its delay is over, not before', async () => {
    const { queue, clock } = setup();
    queue.addAfter('a', 100);
    expect(queue.len()).toBe(0);
    expect(queue.delayed()).toBe(1);
    await clock.advance(99);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(queue.len()).toBe(1);
    expect(queue.delayed()).toBe(0);
  });

  it('keeps the earliest of several delays for the same item', async () => {
    const { queue, clock } = setup();
    queue.addAfter('a', 100);
    queue.addAfter('a', 50);
    queue.addAfter('a', 200);
    await clock.advance(50);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe('a');
    queue.done('a');
    await clock.advance(1_000);
    expect(queue.len()).toBe(0); // the later delays were dropped, not kept
  });

  it('adds at once for a zero or negative delay', () => {
    const { queue } = setup();
    queue.addAfter('a', 0);
    queue.addAfter('b', -5);
    expect(queue.len()).toBe(2);
  });

  it('hands a delayed item to a waiting worker when it falls due', async () => {
    const { queue, clock } = setup();
    const worker = queue.get();
    queue.addAfter('a', 10);
    expect(await settled(worker)).toBe('pending');
    await clock.advance(10);
    expect(await settled(worker)).toBe('a');
  });
});

describe('WorkQueue: rate-limited retries', () => {
  it('backs off per item, base x 2^n, and forget() resets it', async () => {
    const { queue, clock } = setup({ limiter: new ItemExponentialFailureRateLimiter(10, 1_000) });
    const retryAfter = async (): Promise<number> => {
      queue.addRateLimited('a');
      let waited = 0;
      while (queue.len() === 0) {
        await clock.advance(1);
        waited++;
      }
      await queue.get();
      queue.done('a');
      return waited;
    };
    expect([await retryAfter(), await retryAfter(), await retryAfter()]).toEqual([10, 20, 40]);
    expect(queue.numRequeues('a')).toBe(3);
    queue.forget('a');
    expect(queue.numRequeues('a')).toBe(0);
    expect(await retryAfter()).toBe(10);
  });

  it('caps the per-item backoff', () => {
    const limiter = new ItemExponentialFailureRateLimiter<string>(5, 100);
    expect(Array.from({ length: 7 }, () => limiter.when('a'))).toEqual([5, 10, 20, 40, 80, 100, 100]);
    expect(limiter.when('b')).toBe(5); // per item
    for (let i = 0; i < 2000; i++) limiter.when('c');
    expect(limiter.when('c')).toBe(100); // no overflow to Infinity / NaN
  });

  it('limits the overall rate with a token bucket that refills over time', () => {
    const clock = new FakeClock();
    const bucket = new BucketRateLimiter<string>(2, 3, clock); // 2 per second, burst 3
    expect(['a', 'b', 'c', 'd', 'e'].map((i) => bucket.when(i))).toEqual([0, 0, 0, 500, 1000]);
    clock.set(clock.now() + 10_000);
    expect(['f', 'g', 'h', 'i'].map((i) => bucket.when(i))).toEqual([0, 0, 0, 500]); // refilled to burst, not beyond
  });

  it('takes the longest wait of its limiters', () => {
    const clock = new FakeClock();
    const limiter = new MaxOfRateLimiter<string>(new ItemExponentialFailureRateLimiter(5, 1_000), new BucketRateLimiter(1, 1, clock));
    expect([limiter.when('a'), limiter.when('a'), limiter.when('b')]).toEqual([5, 1000, 2000]);
  });

  it('defaults to client-go\'s controller rate limiter', () => {
    const clock = new FakeClock();
    const limiter = controllerRateLimiter<string>(clock);
    expect([limiter.when('a'), limiter.when('a'), limiter.when('a')]).toEqual([5, 10, 20]);
    for (let i = 0; i < 97; i++) limiter.when(`x${i}`); // 3 + 97: the burst of 100 is used up
    expect(limiter.when('y')).toBe(100); // 10 qps: the next token in 100 ms
    expect(limiter.when('z')).toBe(200);
  });
});

describe('WorkQueue: shutdown', () => {
  it('wakes idle workers with undefined and ignores later adds', async () => {
    const { queue } = setup();
    const worker = queue.get();
    queue.shutDown();
    expect(await worker).toBeUndefined();
    queue.add('a');
    queue.addAfter('b', 0);
    expect(queue.len()).toBe(0);
    expect(await queue.get()).toBeUndefined();
  });

  it('still hands out items queued before the shutdown, then undefined', async () => {
    const { queue } = setup();
    queue.add('a');
    queue.shutDown();
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBeUndefined();
  });

  it('cancels delayed adds', async () => {
    const { queue, clock } = setup();
    queue.addAfter('a', 10);
    queue.shutDown();
    await clock.advance(100);
    expect(queue.len()).toBe(0);
    expect(clock.timers).toBe(0);
  });

  it('shutDownWithDrain waits for items in process to be done', async () => {
    const { queue } = setup();
    queue.add('a');
    queue.add('b');
    expect(await queue.get()).toBe('a');
    const drained = queue.shutDownWithDrain();
    expect(await settled(drained)).toBe('pending');
    queue.done('a');
    expect(await settled(drained)).toBe('pending'); // b is still queued
    expect(await queue.get()).toBe('b');
    queue.done('b');
    expect(await settled(drained)).toBeUndefined();
  });

  it('abandon drops queued items and re-adds of items in process: nothing more is handed out', async () => {
    const { queue, depths } = setup();
    queue.add('a');
    queue.add('b');
    queue.add('c');
    expect(await queue.get()).toBe('a');
    queue.add('a'); // would be queued again by done()
    queue.abandon();
    expect(depths.at(-1)).toBe(0);
    expect(await queue.get()).toBeUndefined();
    queue.done('a');
    expect(queue.len()).toBe(0);
    expect(await queue.get()).toBeUndefined();
    await expect(queue.shutDownWithDrain()).resolves.toBeUndefined();
  });

  it('shutDownWithDrain resolves at once when idle', async () => {
    const { queue } = setup();
    await expect(queue.shutDownWithDrain()).resolves.toBeUndefined();
  });
});
