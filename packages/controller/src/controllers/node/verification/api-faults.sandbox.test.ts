// An unreliable API between the controller and the apiserver (the sandbox's fault proxy, which
// affects only this controller's connections): cut watches heal, throttling and server errors are
// retried, and verification carries on.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { k8s } from '@kube-node-ready/sandbox';
import type { FaultProxy } from '../../../../../sandbox/src/fault-proxy.js';
import { harness, progressOf, throughFaultProxy, waitFor, workerPods, type Harness } from '../../../../test/harness.js';

let h: Harness;
let proxy: FaultProxy;
let kubeConfig: k8s.KubeConfig;

beforeAll(async () => {
  h = await harness('ctlapi');
  ({ proxy, kubeConfig } = await throughFaultProxy(h));
});

afterEach(async () => {
  proxy.set({});
  await h.cleanup();
});

afterAll(async () => {
  await h?.cleanup();
  await proxy?.close();
});

describe('an unreliable API', () => {
  it('restarts watches cut by the network and keeps verifying', async () => {
    const ctl = await h.start({ worker: { startTimeout: '30s' } }, undefined, { kubeConfig });
    const first = await h.addNode({ faults: { neverStart: true } });
    await waitFor(async () => (await workerPods(h.namespace, first)).length === 1, 'a worker for the first node');

    proxy.cutAll(); // every open connection, watches included, is reset
    await waitFor(async () => /kube_node_ready_watch_restarts_total\{resource="nodes"\} [1-9]/.test(await ctl.metrics()), 'the node watch to restart', 20_000);

    const second = await h.addNode({ faults: { neverStart: true } });
    await waitFor(async () => (await workerPods(h.namespace, second)).length === 1, 'a worker for a node added after the cut', 30_000);
    expect(ctl.running.isLeader()).toBe(true);
  });

  it('retries throttled (429) and failing (500) calls; still one worker pod per attempt, and nothing written while it runs', async () => {
    const ctl = await h.start({ worker: { startTimeout: '30s' } }, undefined, { kubeConfig });
    proxy.set({ throttleRate: 0.3, errorRate: 0.2 });
    const nodes = await Promise.all([h.addNode({ faults: { neverStart: true } }), h.addNode({ faults: { neverStart: true } }), h.addNode({ faults: { neverStart: true } })]);
    // A bad spell, until the controller's own calls have met failures; then the API recovers
    // (watches failing meanwhile back off up to 30 s).
    const failedCalls = /kube_node_ready_api_requests_total\{operation="[a-z ]+",result="error"\} [1-9]/;
    await waitFor(async () => failedCalls.test(await ctl.metrics()), 'failed API calls to be retried', 60_000, 250);
    proxy.set({});
    for (const node of nodes) {
      await waitFor(async () => (await workerPods(h.namespace, node)).length > 0, `${node}'s worker pod`, 60_000);
      expect((await workerPods(h.namespace, node)).map((p) => p.metadata?.annotations?.['kube-node-ready.io/attempt'])).toEqual(['1']);
      // The attempt in flight is not written (its pod is the record, ADR 0006).
      expect(await progressOf(node)).not.toHaveProperty('attempt');
    }
    expect(proxy.stats().throttled + proxy.stats().errors).toBeGreaterThan(0);
  });
});

/** Writes that reached the apiserver through the proxy, by kind, the Lease's own left out. */
function writes(): Record<string, number> {
  return Object.fromEntries(Object.entries(proxy.requestsByKind()).filter(([kind]) => /^(create|update|patch|delete)/.test(kind) && !kind.includes('leases.')));
}
const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

describe('a leader that can no longer renew its Lease', () => {
  it('writes nothing more once it knows, drops its queued work and stops without draining it', async () => {
    // A slow client-side rate limit keeps work queued when the Lease is lost: 24 nodes, each needing
    // a write to launch, at 2 requests per second.
    const ctl = await h.start(
      { kubernetes: { qps: 2, burst: 2 }, worker: { startTimeout: '60s' }, leaderElection: { leaseDuration: '4s', renewDeadline: '3s', retryPeriod: '1s' } },
      undefined,
      { kubeConfig, restartOnLoss: false },
    );
    let ended: string | undefined;
    void ctl.running.finished.then((result) => (ended = result));
    await waitFor(async () => ctl.running.isLeader(), 'the controller to lead');
    const nodes = await Promise.all(Array.from({ length: 24 }, () => h.addNode({ faults: { neverStart: true } })));
    await waitFor(async () => ctl.logs.some((l) => l.msg === 'started worker pod'), 'a worker pod: work in flight, more queued', 30_000);

    // Every Lease request now fails; the other calls still work (renewDeadline 3 s).
    proxy.set({ failResources: ['leases.coordination.k8s.io'] });
    await waitFor(async () => ended, 'the controller to see that it lost leadership', 20_000, 50);
    expect(ended).toBe('lost');
    // Requests already on their way when it knew may still arrive: a second for them.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const atLoss = writes();
    const started = Date.now();
    await ctl.stop(); // what main() does before it exits with code 1
    const stopMs = Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const after = writes();
    const opened = (await Promise.all(nodes.map(async (n) => (await workerPods(h.namespace, n)).length))).filter((n) => n > 0).length;
    const context = `writes at loss ${JSON.stringify(atLoss)}, after ${JSON.stringify(after)}; stop took ${stopMs} ms; nodes with a worker: ${opened}/${nodes.length}`;
    expect(total(after) - total(atLoss), context).toBe(0);
    // Work was still queued when the Lease was lost (the test would prove nothing otherwise) ...
    expect(opened, context).toBeLessThan(nodes.length);
    // ... and stop() did not drain it.
    expect(ctl.logs.filter((l) => l.msg === 'stopping without waiting for the last reconciles'), context).toEqual([]);
    expect(ctl.logs.some((l) => l.msg === 'lost leadership')).toBe(true);
  });
});

describe('a leader stopped while it starts leading', () => {
  it('finishes the start (the worker ConfigMap written) before it gives up its Lease, and stops cleanly', async () => {
    // The start of leadership writes the worker ConfigMap first: slowed to 3 s, the stop below comes
    // while that write is in flight.
    proxy.set({ slowResources: { configmaps: 3_000 } });
    const ctl = await h.start({}, undefined, { kubeConfig, restartOnLoss: false });
    let ended: string | undefined;
    void ctl.running.finished.then(
      (result) => (ended = result),
      (err: unknown) => (ended = `failed: ${String(err)}`),
    );
    await waitFor(async () => ctl.logs.some((l) => l.msg === 'became leader'), 'the controller to lead', 30_000, 50);
    expect(ctl.logs.some((l) => l.msg === 'worker configuration in place; starting to reconcile')).toBe(false);
    await ctl.stop();
    await waitFor(async () => ended, 'running.finished to settle', 10_000, 50);
    const msgs = ctl.logs.map((l) => l.msg);
    const context = `log: ${JSON.stringify(msgs)}`;
    expect(ended, context).toBe('stopped');
    expect(msgs, context).not.toContain('could not start leading');
    expect(msgs, context).not.toContain('stopping before the start of leadership finished');
    // The start finished before the Lease was given up.
    const started = msgs.indexOf('worker configuration in place; starting to reconcile');
    expect(started, context).toBeGreaterThan(msgs.indexOf('stopping'));
    expect(started, context).toBeLessThan(msgs.indexOf('stopped'));
  });
});
