import { describe, expect, it } from 'vitest';
import { FakeClock, flushPromises } from '../testing/fake-clock.js';
import { Priority, PriorityTokenBucket } from './throttle.js';

describe('PriorityTokenBucket', () => {
  it('lets a burst through at once, then one call per 1/qps', async () => {
    const clock = new FakeClock();
    const bucket = new PriorityTokenBucket(10, 3, clock); // 10/s: a token every 100 ms
    const done: number[] = [];
    for (let i = 0; i < 5; i++) void bucket.acquire().then(() => done.push(i));
    await flushPromises();
    expect(done).toEqual([0, 1, 2]);
    await clock.advance(99);
    expect(done).toEqual([0, 1, 2]);
    await clock.advance(1);
    expect(done).toEqual([0, 1, 2, 3]);
    await clock.advance(100);
    expect(done).toEqual([0, 1, 2, 3, 4]);
    expect(bucket.waiting).toBe(0);
  });

  it('serves high-priority waiters first, in arrival order within a priority', async () => {
    const clock = new FakeClock();
    const bucket = new PriorityTokenBucket(10, 1, clock);
    const order: string[] = [];
    await bucket.acquire(); // the burst is spent
    for (const name of ['launch-1', 'launch-2', 'launch-3']) void bucket.acquire(Priority.Normal).then(() => order.push(name));
    for (const name of ['open-1', 'open-2']) void bucket.acquire(Priority.High).then(() => order.push(name));
    await clock.advance(500);
    expect(order).toEqual(['open-1', 'open-2', 'launch-1', 'launch-2', 'launch-3']);
  });

  it('serves best-effort waiters (Events) only when no other caller waits, however early they came', async () => {
    const clock = new FakeClock();
    const bucket = new PriorityTokenBucket(10, 1, clock);
    const order: string[] = [];
    await bucket.acquire(); // the burst is spent
    for (const name of ['event-1', 'event-2']) void bucket.acquire(Priority.BestEffort).then(() => order.push(name));
    void bucket.acquire(Priority.Normal).then(() => order.push('launch-1'));
    await clock.advance(100);
    expect(order).toEqual(['launch-1']);
    void bucket.acquire(Priority.High).then(() => order.push('open-1'));
    void bucket.acquire(Priority.Normal).then(() => order.push('launch-2'));
    await clock.advance(400);
    expect(order).toEqual(['launch-1', 'open-1', 'launch-2', 'event-1', 'event-2']);
  });

  it('does not let a new caller overtake waiters', async () => {
    const clock = new FakeClock();
    const bucket = new PriorityTokenBucket(10, 1, clock);
    await bucket.acquire();
    const order: string[] = [];
    void bucket.acquire().then(() => order.push('first'));
    await clock.advance(50);
    void bucket.acquire().then(() => order.push('second'));
    await clock.advance(50);
    expect(order).toEqual(['first']);
    await clock.advance(100);
    expect(order).toEqual(['first', 'second']);
  });

  it('refills up to the burst, not beyond, while idle', async () => {
    const clock = new FakeClock();
    const bucket = new PriorityTokenBucket(1, 2, clock);
    await bucket.acquire();
    await bucket.acquire();
    await clock.advance(60_000);
    let got = 0;
    for (let i = 0; i < 3; i++) void bucket.acquire().then(() => got++);
    await flushPromises();
    expect(got).toBe(2);
  });
});
