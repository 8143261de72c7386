// An unreliable API between the controller and the apiserver (the sandbox's fault proxy, which
// affects only this controller's connections): cut watches heal, throttling and server errors are
// retried, and verification carries on.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { k8s } from '@kube-node-ready/sandbox';
import type { FaultProxy } from '../../../../../sandbox/src/fault-proxy.js';
import { annotations, harness, readNode, throughFaultProxy, waitFor, workerPods, type Harness } from '../../../../test/harness.js';

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

  it('retries throttled (429) and failing (500) calls; progress is still written exactly once per attempt', async () => {
    const ctl = await h.start({ worker: { startTimeout: '30s' } }, undefined, { kubeConfig });
    proxy.set({ throttleRate: 0.3, errorRate: 0.2 });
    const nodes = await Promise.all([h.addNode({ faults: { neverStart: true } }), h.addNode({ faults: { neverStart: true } }), h.addNode({ faults: { neverStart: true } })]);
    // A bad spell, until the controller's own calls have met failures; then the API recovers
    // (watches failing meanwhile back off up to 30 s).
    const failedCalls = /kube_node_ready_api_requests_total\{operation="[a-z ]+",result="error"\} [1-9]/;
    await waitFor(async () => failedCalls.test(await ctl.metrics()), 'failed API calls to be retried', 60_000, 250);
    proxy.set({});
    for (const node of nodes) {
      await waitFor(async () => annotations(await readNode(node))['kube-node-ready.io/phase'] === 'Verifying', `${node} to be verifying`, 60_000);
      expect((await workerPods(h.namespace, node)).map((p) => p.metadata?.annotations?.['kube-node-ready.io/attempt'])).toEqual(['1']);
    }
    expect(proxy.stats().throttled + proxy.stats().errors).toBeGreaterThan(0);
  });
});
