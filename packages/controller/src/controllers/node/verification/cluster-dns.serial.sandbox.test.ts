// The cluster DNS Service without a ready endpoint (issue 14 item 3: direct evidence, and the cold
// start): the state of a cluster whose CoreDNS cannot run anywhere yet because every schedulable
// node carries the verification taint, or of a broken CoreDNS rollout. The sandbox's kube-dns
// EndpointSlice loses its ready endpoints, so the Service's ClusterIP answers nothing (sandbox
// dns.ts), and every node's dns check fails. The controller reads the Service's EndpointSlices,
// so each attempt is inconclusive from the first node on: no counted failure, no Failed node, no
// deletion (remediation on, with a stuckNodeTimeout, its shortest, the outage outlasts), the condition
// Unknown/ClusterWide naming the Service, kube_node_ready_cluster_wide_fault{check="dns"} 1. The way
// out (CoreDNS gets endpoints: docs/troubleshooting.md "Cold start") opens every node, and the
// signal clears.
//
// What it holds: the direct evidence decides from the first node (the shared-failure rule alone
// needs three), and an inconclusive node is never stuck. Serial: the cluster's DNS is shared by every test.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import { harness, nodeEvents, progressOf, readNode, verificationCondition, waitFor, type Harness } from '../../../../test/harness.js';
import { sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;
const discovery = () => sandbox().kc.makeApiClient(k8s.DiscoveryV1Api);

async function setDnsEndpointsReady(ready: boolean): Promise<void> {
  const api = discovery();
  const slice = await api.readNamespacedEndpointSlice({ namespace: 'kube-system', name: 'kube-dns-sandbox' });
  slice.endpoints = (slice.endpoints ?? []).map((e) => ({ ...e, conditions: { ...e.conditions, ready } }));
  await api.replaceNamespacedEndpointSlice({ namespace: 'kube-system', name: 'kube-dns-sandbox', body: slice });
}

beforeAll(async () => {
  h = await harness('ctldns');
});

afterAll(async () => {
  await setDnsEndpointsReady(true).catch(() => undefined);
  await h?.cleanup();
});

const NODES = 3;
const faultSeries = (value: 0 | 1) => `kube_node_ready_cluster_wide_fault{check="dns"} ${value}`;

it('the cluster DNS Service without endpoints: every attempt inconclusive from the first node, no failure, no deletion; endpoints back, every node opens', { timeout: 300_000 }, async () => {
  await setDnsEndpointsReady(false);
  const c = await h.start({
    reconciliation: { maxRetries: 1, initialBackoff: '2s', maxBackoff: '5s' },
    worker: { timeout: '20s', scheduleTimeout: '60s', startTimeout: '60s', checks: { checkTimeout: '3s' } },
    nodeManagement: {
      deleteFailedNodes: true,
      remediation: { minNodeAge: '0s', stuckNodeTimeout: '60s', circuitBreaker: { enabled: false } },
    },
  });
  const created = Date.now();
  const nodes = await Promise.all(Array.from({ length: NODES }, (_, i) => h.addNode({ prefix: `d${i}${h.id}` })));

  // Each node: an inconclusive attempt naming the Service, the condition saying so.
  let seen = '';
  // The messages are checked as read here: the next attempt (2 s later) replaces the condition.
  const inconclusive = await waitFor(
    async () => {
      const state = await Promise.all(
        nodes.map(async (node) => {
          // Inconclusive is a step, not a verdict: the condition is the NodeVerification's.
          const condition = await verificationCondition(node);
          const events = (await nodeEvents(node)).map((e) => e.reason);
          return { node, condition: `${condition?.status}/${condition?.reason}`, message: condition?.message ?? '', events };
        }),
      );
      seen = JSON.stringify(state);
      return state.every((s) => s.condition === 'Unknown/ClusterWide' && s.events.includes('VerificationInconclusive')) ? state : undefined;
    },
    'every node inconclusive (condition Unknown/ClusterWide, a VerificationInconclusive Event)',
    120_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; saw ${seen}`);
  });
  for (const { node, message } of inconclusive) {
    expect(message, node).toMatch(/^attempt inconclusive, not counted against the node: cluster-wide: the cluster DNS Service kube-system\/kube-dns has no ready endpoint; not this node's fault: /);
  }
  expect(await c.metrics()).toContain(faultSeries(1));

  // Past stuckNodeTimeout (60 s) and several attempts on: nothing counted, failed or deleted.
  await new Promise((r) => setTimeout(r, Math.max(0, created + 75_000 - Date.now())));
  for (const node of nodes) {
    const n = await readNode(node);
    expect(n, `${node} still exists`).toBeDefined();
    const a = await progressOf(node);
    // Between attempts, or in the next one: never Failed.
    expect(a['phase'], node).toMatch(/^(Backoff|Verifying)$/);
    expect(a['failures'] ?? '0', `${node}: counted failures`).toBe('0');
    expect(Number(a['attempt']), `${node}: attempts`).toBeGreaterThanOrEqual(2);
    const reasons = (await nodeEvents(node)).map((e) => e.reason);
    expect(reasons.filter((r) => /^(VerificationChecksFailed|VerificationFailed|Remediation)/.test(r ?? '')), node).toEqual([]);
  }
  expect(await c.metrics()).toMatch(/kube_node_ready_remediations_total\{action="delete-node",result="deleted"\} 0/);

  // The way out: CoreDNS gets endpoints (scheduled on an untainted node, or tolerating the taint).
  await setDnsEndpointsReady(true);
  await h.waitForOpen(nodes, 'every node to open once the DNS Service has endpoints', 120_000);
  await waitFor(async () => (await c.metrics()).includes(faultSeries(0)) || undefined, 'the cluster-wide signal for dns to clear', 30_000);
  for (const node of nodes) expect((await progressOf(node))['failures'] ?? '0', node).toBe('0');
});
