// Worker pods the API server refuses (issue 14 item 6): a ValidatingAdmissionPolicy of the real
// kube-apiserver denies every pod in the worker namespace, as an admission webhook, a ResourceQuota
// or Pod Security would. No node is at fault: no attempt is used, each node says why (Event), the
// refusals are counted, and they open remediation's circuit breaker, so a cluster that cannot run
// worker pods does not get its new nodes replaced. Once the policy goes, every node opens at its
// first attempt.
//
// A refusal left as a reconcile error in the log would give no Event and no metric and keep the
// breaker closed, and stuck-node remediation would then replace every node.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import { harness, progressOf, nodeEvents, waitFor, type Harness } from '../../../../test/harness.js';
import { core, sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;
let policy = '';
const admission = () => sandbox().kc.makeApiClient(k8s.AdmissionregistrationV1Api);

beforeAll(async () => {
  h = await harness('ctlrefuse');
  policy = `knr-deny-pods-${h.id}`;
});

afterAll(async () => {
  await h?.cleanup();
  await removePolicy();
});

async function removePolicy(): Promise<void> {
  if (!policy) return;
  await admission().deleteValidatingAdmissionPolicyBinding({ name: policy }).catch(() => undefined);
  await admission().deleteValidatingAdmissionPolicy({ name: policy }).catch(() => undefined);
}

const NODES = 5; // the breaker's default minSamples

it('refused worker pods use no attempt, are reported, and open the circuit breaker; the nodes open once pods are allowed', { timeout: 180_000 }, async () => {
  await admission().createValidatingAdmissionPolicy({
    body: {
      metadata: { name: policy },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': h.namespace } },
          resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
        },
        validations: [{ expression: 'false', message: 'pods are not allowed in this namespace (test policy)', reason: 'Forbidden' }],
      },
    },
  });
  await admission().createValidatingAdmissionPolicyBinding({
    body: { metadata: { name: policy }, spec: { policyName: policy, validationActions: ['Deny'] } },
  });
  // The API server applies a new policy once its informer has it: probe until a pod is refused.
  let probe = '';
  await waitFor(
    async () => {
      try {
        await core().createNamespacedPod({ namespace: h.namespace, body: { metadata: { generateName: 'probe-' }, spec: { nodeName: 'none', containers: [{ name: 'c', image: 'sandbox-shell' }] } } });
        probe = 'created';
        return undefined;
      } catch (err) {
        probe = String(err).slice(0, 200);
        return (err as { code?: number }).code === 403 || undefined;
      }
    },
    'the policy to refuse pods',
    60_000,
    500,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; last probe: ${probe}`);
  });

  const nodes = await Promise.all(Array.from({ length: NODES }, (_, i) => h.addNode({ prefix: `r${i}${h.id}` })));
  // Worker deadlines a busy machine keeps (the harness's 4 s are for tests of those deadlines).
  const c = await h.start({ nodeManagement: { deleteFailedNodes: true, remediation: { minNodeAge: '0s' } }, worker: { scheduleTimeout: '60s', startTimeout: '60s' } });

  // Each node says why it has no worker, once.
  for (const node of nodes) {
    const events = await waitFor(
      async () => {
        const e = (await nodeEvents(node)).filter((x) => x.reason === 'WorkerPodRefused');
        return e.length > 0 ? e : undefined;
      },
      `a WorkerPodRefused Event on ${node}`,
      60_000,
    );
    expect(events).toHaveLength(1);
    expect(events[0]?.type).toBe('Warning');
    expect(events[0]?.message).toMatch(/the API server refused worker pod .*pods are not allowed in this namespace \(test policy\).*not counted as an attempt/);
  }
  // Refusals counted, and the breaker open: every refused node counts once as a failure.
  let text = '';
  await waitFor(
    async () => {
      text = await c.metrics();
      return text.includes('kube_node_ready_remediation_blocked{reason="circuit-breaker"} 1') || undefined;
    },
    'the circuit breaker to open',
    60_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; metrics: ${text.split('\n').filter((l) => l.includes('remediation_blocked') || l.includes('refused')).join('; ')}`);
  });
  const refused = Number(/kube_node_ready_worker_pods_refused_total\{reason="Forbidden"\} (\d+)/.exec(text)?.[1] ?? '0');
  expect(refused).toBeGreaterThanOrEqual(NODES);
  // No attempt was used: no progress on any node.
  for (const node of nodes) expect((await progressOf(node))['attempt'] ?? '0', node).toBe('0');

  // Pods allowed again: every node opens at its first attempt.
  await removePolicy();
  await h.waitForOpen(nodes, 'every node to open once pods are allowed', 90_000).catch((err: unknown) => {
    throw new Error(`${String(err)}; controller logs about ${nodes[0]}:\n${c.logs.filter((l) => l.node === nodes[0] || l.level === 'error').slice(-30).map((l) => JSON.stringify(l)).join('\n')}`);
  });
  for (const node of nodes) expect((await progressOf(node))['attempt'], node).toBe('1');
});
