import { describe, expect, it } from 'vitest';
import { flushPromises } from '../testing/fake-clock.js';
import { offlineKubeClient as client } from '../testing/offline-kube.js';
import type { LeanRequest } from './lean.js';
import { Priority } from './throttle.js';

// KubeClient's rate limit, with closures in place of requests (testing/offline-kube.ts).

describe('KubeClient rate limit', () => {
  it('reports time waited for kubernetes.qps, except by Events (best effort: they wait behind every other call)', async () => {
    const { kube, clock } = await client({ qps: 1, burst: 1 });
    const throttled: number[] = [];
    kube.observe({ throttled: (seconds) => throttled.push(seconds) });
    await kube.write('patch node', async () => 'spends the burst');
    const second = kube.write('patch node', async () => 'waited');
    await flushPromises();
    await clock.advance(1_000);
    await expect(second).resolves.toBe('waited');
    expect(throttled).toEqual([1]);
    const event = kube.write('create event', async () => 'recorded', { priority: Priority.BestEffort });
    await flushPromises();
    await clock.advance(1_000);
    await expect(event).resolves.toBe('recorded');
    expect(throttled).toEqual([1]);
  });

  it("Events share kubernetes.qps with the nodes' calls and go after those that wait", async () => {
    const { kube, clock } = await client({ qps: 1, burst: 1 });
    // What is sent, in order, in place of the requests (no request leaves the process).
    const sent: string[] = [];
    const record = async (req: LeanRequest) => {
      sent.push(`${req.method} ${req.path}`);
      return '{}';
    };
    (kube as unknown as { lean: { send: typeof record; json: typeof record } }).lean = { send: record, json: record };
    await kube.getPod('ns', 'spends-the-burst');
    const calls = [
      kube.createEvent('default', { metadata: { name: 'e1' }, involvedObject: {} }),
      kube.bumpEvent('default', 'e0', 2, new Date(0).toISOString()),
      kube.createPod({ metadata: { name: 'p1', namespace: 'ns' } }),
      kube.patchNode('n1', [], Priority.High),
    ];
    await flushPromises();
    for (let i = 0; i < 4; i++) await clock.advance(1_000);
    await Promise.all(calls);
    expect(sent).toEqual([
      'GET /api/v1/namespaces/ns/pods/spends-the-burst',
      'PATCH /api/v1/nodes/n1',
      'POST /api/v1/namespaces/ns/pods',
      'POST /api/v1/namespaces/default/events',
      'PATCH /api/v1/namespaces/default/events/e0',
    ]);
  });
});
