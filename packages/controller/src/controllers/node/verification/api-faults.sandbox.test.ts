// An unreliable API between the controller and the apiserver (the sandbox's fault proxy, which
// affects only this controller's connections): cut watches heal, throttling and server errors are
// retried, and verification carries on.
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import { certPaths } from '../../../../../sandbox/src/certs.js';
import { startFaultProxy, type FaultProxy } from '../../../../../sandbox/src/fault-proxy.js';
import { harness, readNode, waitFor, workerPods, annotations, type Harness } from '../../../../test/harness.js';
import { core, sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;
let proxy: FaultProxy;
let kubeConfig: k8s.KubeConfig;

beforeAll(async () => {
  h = await harness('ctlapi');
  const { layout } = sandbox();
  const certs = certPaths(layout.paths.certs);
  proxy = await startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: certs.caCert, certFile: certs.serverCert, keyFile: certs.serverKey });
  // The controller's own identity (a bearer token), so the proxy can forward it.
  await core().createNamespacedServiceAccount({ namespace: h.namespace, body: { metadata: { name: 'controller' } } });
  await sandbox()
    .kc.makeApiClient(k8s.RbacAuthorizationV1Api)
    .createClusterRoleBinding({
      body: {
        metadata: { name: `knr-ctl-${h.namespace}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name: 'controller', namespace: h.namespace }],
      },
    });
  const token = await core().createNamespacedServiceAccountToken({ name: 'controller', namespace: h.namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  kubeConfig = new k8s.KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'proxy', server: proxy.url, caData: readFileSync(certs.caCert).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'controller', token: token.status?.token ?? '' }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'controller' }],
    currentContext: 'proxy',
  });
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
