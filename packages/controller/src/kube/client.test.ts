import { describe, expect, it } from 'vitest';
import { flushPromises } from '../testing/fake-clock.js';
import { offlineKubeClient as client } from '../testing/offline-kube.js';
import type { PriorityTokenBucket } from './throttle.js';

// KubeClient's rate limit, with closures in place of requests (testing/offline-kube.ts).

describe('KubeClient rate-limit metric', () => {
  it('reports time waited for kubernetes.qps, not for the Events budget', async () => {
    const { kube, clock } = await client({ qps: 1, burst: 1 });
    const throttled: number[] = [];
    kube.observe({ throttled: (seconds) => throttled.push(seconds) });
    await kube.write('patch node', async () => 'spends the burst');
    const second = kube.write('patch node', async () => 'waited');
    await flushPromises();
    await clock.advance(1_000);
    await expect(second).resolves.toBe('waited');
    expect(throttled).toEqual([1]);
    // The Events budget (its own limiter, a burst of 50 at 10/s): spent, then waited for, and not counted.
    const events = (kube as unknown as { eventLimiter: PriorityTokenBucket }).eventLimiter;
    const spent: Array<Promise<string>> = [];
    for (let i = 0; i < 60; i++) spent.push(kube.write('create event', async () => 'recorded', { limiter: events }));
    await flushPromises();
    await clock.advance(10_000);
    expect(await Promise.all(spent)).toHaveLength(60);
    expect(throttled).toEqual([1]);
  });
});
