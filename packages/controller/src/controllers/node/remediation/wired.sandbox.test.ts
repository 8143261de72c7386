// The whole controller (startController, real clock) with remediation on, next to real Karpenter: a
// pending pod makes Karpenter launch a node from a NodePool whose startupTaints carry the
// verification taint; that node's worker can never start, so it exhausts its retries, and the
// controller deletes its NodeClaim. Karpenter drains and deletes the node and launches a replacement
// for the pod that is still pending. A healthy node beside it is verified and kept.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createNodePool, deleteNodePool, FAULT, listNodeClaims, type NodeClaim } from '@kube-node-ready/sandbox';
import type { ControllerConfigInput } from '../../../config/schema.js';
import { harness, progressOf, nodeEvents, nodeEventsWhen, readNode, waitFor, type Harness } from '../../../../test/harness.js';
import { core, pendingWorkloadFor, sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;
let pool = '';

beforeAll(async () => {
  h = await harness('ctlrem');
  pool = `wired-${h.id}`;
});

afterAll(async () => {
  await h?.cleanup();
  if (pool) await deleteNodePool(sandbox().kc, pool);
});

const liveClaims = async (): Promise<NodeClaim[]> => (await listNodeClaims(sandbox().kc, pool)).filter((c) => !c.metadata.deletionTimestamp);

it('deleteFailedNodes: a failed Karpenter node is replaced through its NodeClaim; a healthy node is verified and kept', async () => {
  // The pool's own taint keeps other tests' pending pods off it; the worker tolerates it.
  const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' };
  await createNodePool(sandbox().kc, {
    name: pool,
    taints: [dedicated],
    startupTaints: [h.taint],
    labels: { [h.selector.key]: h.selector.value },
    annotations: { [FAULT.neverStart]: 'true' },
  });
  const overrides = {
    worker: { tolerations: [{ key: dedicated.key, operator: 'Equal', value: pool, effect: 'NoSchedule' }] },
    nodeManagement: { deleteFailedNodes: true, remediation: { minNodeAge: '0s' } },
  } as unknown as ControllerConfigInput;
  const ctl = await h.start(overrides);
  const good = await h.addNode({ prefix: `good${h.id}` });

  // A workload for the pool: Karpenter launches a node for it.
  await pendingWorkloadFor(pool, h.namespace, dedicated, '1');
  const first = await waitFor(
    async () => {
      const c = (await liveClaims()).find((x) => x.status?.nodeName);
      return c && (await readNode(c.status!.nodeName!))?.metadata?.labels?.['karpenter.sh/registered'] === 'true' ? c : undefined;
    },
    `Karpenter to launch and register a node in ${pool}`,
    90_000,
    500,
  );
  const bad = first.status!.nodeName!;

  // 1 + maxRetries (1) attempts, each "not started" after startTimeout, then remediation.
  await waitFor(async () => !(await liveClaims()).some((c) => c.metadata.name === first.metadata.name), `NodeClaim ${first.metadata.name} to be deleted`, 120_000, 250);
  const reasons = (await nodeEventsWhen(bad, (list) => list.some((e) => e.reason === 'RemediationNodeClaimDeleted'), 'the RemediationNodeClaimDeleted Event')).map((e) => e.reason);
  expect(reasons).toEqual(expect.arrayContaining(['VerificationWorkerNotStarted', 'VerificationFailed', 'RemediationNodeClaimDeleted']));
  const text = await ctl.metrics();
  expect(text).toContain('kube_node_ready_remediations_total{action="delete-nodeclaim",result="deleted"} 1');
  expect(text).toContain('kube_node_ready_remediation_blocked{reason="circuit-breaker"} 0');

  // Karpenter drains and deletes the node, and launches a replacement for the pending pod.
  await waitFor(async () => (await readNode(bad)) === undefined, `Karpenter to delete node ${bad}`, 90_000, 500);
  const replacement = await waitFor(async () => (await liveClaims()).find((c) => c.metadata.name !== first.metadata.name), 'a replacement NodeClaim', 90_000, 500);
  expect(replacement.metadata.name).not.toBe(first.metadata.name);

  const opened = await waitFor(async () => (await readNode(good))?.metadata?.labels?.[h.verifiedLabel.key] === 'true', `${good} to be verified`, 60_000, 250);
  expect(opened).toBe(true);
  expect((await nodeEvents(good)).map((e) => e.reason)).not.toContain('RemediationNodeDeleted');
  // The replacement's node is a new node to verify (it fails too: the pool is broken).
  expect((await core().listNode({ labelSelector: `karpenter.sh/nodepool=${pool}` })).items.every((n) => n.metadata?.name !== bad)).toBe(true);
}, 360_000);

it('remediation off: a failed Karpenter node stops counting as capacity (the failed taint): Karpenter launches another node for the pending pod, and the failed one is kept', async () => {
  await h.stopAll(); // the first test's controller remediates
  const capPool = `cap-${h.id}`;
  const dedicated = { key: 'test.kube-node-ready.io/pool', value: capPool, effect: 'NoSchedule' };
  // Every node of the pool is broken (its containers never start).
  await createNodePool(sandbox().kc, {
    name: capPool,
    taints: [dedicated],
    startupTaints: [h.taint],
    labels: { [h.selector.key]: h.selector.value },
    annotations: { [FAULT.neverStart]: 'true' },
  });
  try {
    const overrides = {
      worker: { startTimeout: '3s', tolerations: [{ key: dedicated.key, operator: 'Equal', value: capPool, effect: 'NoSchedule' }] },
      nodeManagement: { deleteFailedNodes: false },
    } as unknown as ControllerConfigInput;
    await h.start(overrides);
    await pendingWorkloadFor(capPool, h.namespace, { key: dedicated.key, value: capPool, effect: 'NoSchedule' }, '1', 'cap');
    const claims = async () => (await listNodeClaims(sandbox().kc, capPool)).filter((c) => !c.metadata.deletionTimestamp);
    const first = await waitFor(async () => (await claims()).find((c) => c.status?.nodeName), `Karpenter to launch a node in ${capPool}`, 90_000, 200);
    const broken = first.status!.nodeName!;
    // Only one NodeClaim until then: the pod was waiting for the first node. (Claims are read before
    // the phase: a second one seen with the node not yet Failed is a launch before the failure. After
    // it, Karpenter may react before this loop looks again.)
    const claimsBeforeFailure = new Set<string>();
    await waitFor(
      async () => {
        const names = (await claims()).map((c) => c.metadata.name ?? '');
        if ((await progressOf(broken))['phase'] === 'Failed') return true;
        for (const name of names) claimsBeforeFailure.add(name);
        return undefined;
      },
      `${broken} to fail`,
      90_000,
      250,
    );
    expect([...claimsBeforeFailure]).toEqual([first.metadata.name]);
    expect((await readNode(broken))?.spec?.taints?.map((t) => t.key)).toEqual(expect.arrayContaining([h.taint.key, 'kube-node-ready.io/verification-failed']));

    // Karpenter ignores startup taints on a node that has not initialized, so the first node was
    // capacity for the pod; the failed taint is not a startup taint: a second node is launched.
    const second = await waitFor(async () => (await claims()).find((c) => c.metadata.name !== first.metadata.name), 'Karpenter to launch another node for the pending pod', 120_000, 500);
    expect(second.metadata.name).not.toBe(first.metadata.name);
    // The failed node is kept, with its taints, for inspection (remediation is off).
    expect((await readNode(broken))?.spec?.taints?.map((t) => t.key)).toEqual(expect.arrayContaining([h.taint.key, 'kube-node-ready.io/verification-failed']));
    expect((await claims()).map((c) => c.metadata.name)).toContain(first.metadata.name);
  } finally {
    await h.stopAll();
    await deleteNodePool(sandbox().kc, capPool);
  }
}, 360_000);
