// Restarts, deletions, concurrent writers, leader election and dry run against the real apiserver.
// Workers here never start (sandbox fault annotation), so no worker binary is involved: what is
// tested is the controller's bookkeeping around them.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import { harness, progressOf, nodeEvents, readNode, waitFor, workerPods, type Harness } from '../../../../test/harness.js';
import { core, sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlres');
});

afterEach(async () => {
  await h.cleanup(); // each test starts with no nodes of this harness
});

afterAll(async () => {
  await h?.cleanup();
});

const attemptOf = (pod: k8s.V1Pod) => pod.metadata?.annotations?.['kube-node-ready.io/attempt'];

async function patchNodeJson(name: string, ops: object[]): Promise<void> {
  await core().patchNode({ name, body: ops }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch));
}

describe('progress survives the controller', () => {
  it('a restarted controller continues the attempt in flight: no second pod, the count goes on', async () => {
    const node = await h.addNode({ faults: { neverStart: true } });
    // The start timeout must outlast stopping one controller and starting the next on a busy machine.
    const slow = { worker: { startTimeout: '20s' }, reconciliation: { maxRetries: 2 } };
    const first = await h.start(slow);
    const pod1 = await waitFor(async () => (await workerPods(h.namespace, node)).find((p) => attemptOf(p) === '1'), 'attempt 1');
    // An attempt in flight is not written: the pod is its record (ADR 0006).
    expect(await progressOf(node)).not.toHaveProperty('attempt');
    await first.stop();

    const second = await h.start(slow);
    // It follows attempt 1 to its deadline instead of starting another.
    await waitFor(async () => second.logs.some((l) => l.msg === 'waiting' && l.attempt === 1 && l.node === node), 'the new controller to wait on attempt 1');
    const pods = await workerPods(h.namespace, node);
    expect(pods.map((p) => p.metadata?.name)).toEqual([pod1.metadata?.name]);
    expect(pods[0]?.metadata?.uid).toBe(pod1.metadata?.uid);

    // Attempt 1 times out under the new controller; the next is number 2, not 1 again.
    const pod2 = await waitFor(async () => (await workerPods(h.namespace, node)).find((p) => attemptOf(p) === '2'), 'attempt 2', 45_000);
    expect(pod2.metadata?.name).not.toBe(pod1.metadata?.name);
    expect((await progressOf(node))['failures']).toBe('1');
  });

  it('adopts a worker pod it finds for an attempt newer than the stored progress, and follows it without writing', async () => {
    const node = await h.addNode({ faults: { neverStart: true } });
    // The pod of attempt 1 exists, nothing is stored (a dry run launches, and writes nothing).
    const probe = await h.start({ dryRun: true, worker: { startTimeout: '30s' } });
    const pod = await waitFor(async () => (await workerPods(h.namespace, node))[0], 'a worker pod');
    await probe.stop();
    expect((await progressOf(node))).not.toHaveProperty('attempt'); // dry run wrote nothing

    const ctl = await h.start({ worker: { startTimeout: '30s' } });
    await waitFor(async () => ctl.logs.find((l) => l.msg === 'following an attempt whose worker pod already existed' && l.node === node), 'the controller to adopt the pod');
    await waitFor(async () => ctl.logs.find((l) => l.msg === 'waiting' && l.attempt === 1 && l.node === node), 'the controller to wait on attempt 1');
    expect((await workerPods(h.namespace, node)).map((p) => p.metadata?.uid)).toEqual([pod.metadata?.uid]);
    expect(await progressOf(node)).not.toHaveProperty('attempt');
    expect(ctl.logs.filter((l) => l.msg === 'started worker pod' && l.node === node)).toEqual([]);
  });
});

describe('a node that goes away', () => {
  it('deleted mid-verification: its worker is deleted, its metrics are gone, no error loop', async () => {
    const node = await h.addNode({ faults: { neverStart: true } });
    const ctl = await h.start({ worker: { startTimeout: '30s' } });
    await waitFor(async () => (await workerPods(h.namespace, node)).length === 1, 'a worker pod');
    await waitFor(async () => (await ctl.metrics()).includes(`node="${node}"`), 'per-node metrics');

    await core().deleteNode({ name: node });
    // The controller deletes the pod (so does the garbage collector: the pod is owned by the Node).
    // No kubelet confirms the deletion of a pod on a deleted node: it stays Terminating until
    // kube-controller-manager's pod GC removes it after its 40 s quarantine. Being deleted is enough.
    await waitFor(async () => (await workerPods(h.namespace, node)).every((p) => p.metadata?.deletionTimestamp), 'the worker pod to be deleted', 60_000, 500);
    await waitFor(async () => !(await ctl.metrics()).includes(`node="${node}"`), 'the node series to be removed');
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await ctl.metrics()).toContain('kube_node_ready_controller_reconcile_errors_total 0');
  });
});

describe('other writers', () => {
  it('taints, labels and annotations others add or remove during verification survive every write', async () => {
    const cni = { key: 'node.example.com/cni-not-ready', value: 'true', effect: 'NoSchedule' };
    const node = await h.addNode({ taints: [cni, h.taint], faults: { neverStart: true } });
    const ctl = await h.start({ reconciliation: { maxRetries: 3 }, worker: { startTimeout: '2s' } });
    // Another controller works on the same node meanwhile: removes its own taint (moving ours
    // to index 0), adds another, labels and annotates.
    // One write at a time, each awaited, so the last round is stored before the final read.
    let round = 0;
    let stop = false;
    const other = (async () => {
      while (!stop) {
        round++;
        const ops: object[] =
          round === 1
            ? [{ op: 'test', path: '/spec/taints/0/key', value: cni.key }, { op: 'remove', path: '/spec/taints/0' }]
            : [
                { op: 'add', path: `/metadata/labels/other-writer~1round`, value: String(round) },
                { op: 'add', path: `/metadata/annotations/other-writer~1round`, value: String(round) },
              ];
        if (round === 3) ops.push({ op: 'add', path: '/spec/taints/-', value: { key: 'other-writer/x', value: '1', effect: 'PreferNoSchedule' } });
        await patchNodeJson(node, ops);
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    try {
      await waitFor(async () => (await progressOf(node))['phase'] === 'Failed', 'the node to fail', 40_000);
    } finally {
      stop = true;
      await other;
    }
    expect(round).toBeGreaterThanOrEqual(3);
    const final = await readNode(node);
    // Ours and the other writer's, and the failed taint the Failed write appended.
    expect(final?.spec?.taints?.map((t) => t.key).sort()).toEqual([h.taint.key, 'other-writer/x', 'kube-node-ready.io/verification-failed'].sort());
    expect(final?.metadata?.labels?.['other-writer/round']).toBe(String(round));
    expect(final?.metadata?.annotations?.['other-writer/round']).toBe(String(round));
    expect((await progressOf(node))['attempt']).toBe('4');
    expect(await ctl.metrics()).toContain('kube_node_ready_controller_reconcile_errors_total 0');
  });
});

describe('leader election', () => {
  it('only the leader acts; when it stops, the other takes over and continues', async () => {
    const a = await h.start({ worker: { startTimeout: '30s' } }, 'replica-a');
    const b = await h.start({ worker: { startTimeout: '30s' } }, 'replica-b');
    await waitFor(async () => a.running.isLeader() !== b.running.isLeader(), 'exactly one leader');
    const [leader, follower] = a.running.isLeader() ? [a, b] : [b, a];

    const node = await h.addNode({ faults: { neverStart: true } });
    await waitFor(async () => leader.logs.some((l) => l.msg === 'started worker pod' && l.node === node), 'the leader to start a worker');
    expect((await workerPods(h.namespace, node)).length).toBe(1);
    expect(follower.logs.filter((l) => l.msg === 'started worker pod')).toEqual([]);

    // Followers are ready too (caches synced) but do not lead.
    expect(await follower.metrics()).toContain('kube_node_ready_leader 0');
    expect(await follower.metrics()).toContain('kube_node_ready_controller_healthy 1');
    expect(await leader.metrics()).toContain('kube_node_ready_leader 1');

    await leader.stop(); // releases the lease
    const lease = await sandbox().kc.makeApiClient(k8s.CoordinationV1Api).readNamespacedLease({ name: `knr-${h.id}`, namespace: h.namespace });
    expect(lease.spec?.holderIdentity ?? '').toBe('');
    await waitFor(async () => follower.running.isLeader(), 'the follower to lead', 10_000);

    // The new leader continues the same attempt: no second pod for attempt 1.
    await waitFor(async () => follower.logs.some((l) => l.msg === 'waiting' && l.node === node && l.attempt === 1), 'the new leader to follow attempt 1');
    expect((await workerPods(h.namespace, node)).map(attemptOf)).toEqual(['1']);
  });
});

describe('bounded concurrency', () => {
  it('never runs more workers than maxConcurrentVerifications; the others wait for a slot and get one', async () => {
    const nodes = await Promise.all(Array.from({ length: 5 }, () => h.addNode({ faults: { neverStart: true } })));
    await h.start({ reconciliation: { maxConcurrentVerifications: 2, maxRetries: 0, workers: 8 }, worker: { startTimeout: '2s' } });
    let most = 0;
    const seen = new Set<string>();
    const deadline = Date.now() + 60_000;
    while (seen.size < nodes.length && Date.now() < deadline) {
      const list = await core().listNamespacedPod({ namespace: h.namespace });
      const live = list.items.filter((p) => !p.metadata?.deletionTimestamp && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed');
      most = Math.max(most, live.length);
      for (const p of list.items) seen.add(p.metadata?.annotations?.['kube-node-ready.io/node-name'] ?? '');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(most).toBe(2);
    expect([...seen].filter((n) => nodes.includes(n)).sort()).toEqual([...nodes].sort());
  });
});

describe('dry run', () => {
  it('launches workers and reports outcomes, but writes nothing to the node', async () => {
    const node = await h.addNode({ faults: { neverStart: true } });
    const ctl = await h.start({ dryRun: true, reconciliation: { maxRetries: 1 } });
    await waitFor(async () => (await ctl.metrics()).includes(`kube_node_ready_verification_status{node="${node}",status="failed"} 1`), 'the node to fail (in memory)', 30_000);
    const after = await readNode(node);
    expect(Object.keys(after?.metadata?.annotations ?? {}).filter((k) => k.startsWith('kube-node-ready.io/'))).toEqual([]);
    expect(await progressOf(node)).toEqual({}); // no NodeVerification either
    expect(after?.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();
    expect(after?.spec?.taints?.filter((t) => t.key === h.taint.key)).toEqual([h.taint]);
    expect(after?.status?.conditions?.find((c) => c.type === h.conditionType)).toBeUndefined();
    expect(after?.metadata?.managedFields?.some((f) => f.manager === 'kube-node-ready-controller')).toBe(false);
    // Node writes are the only thing dry run skips: events and workers are real. (Events are
    // created after the outcome, without holding up the reconcile: wait for them.)
    const reasons = await waitFor(async () => {
      const list = (await nodeEvents(node)).map((e) => e.reason);
      return list.includes('VerificationFailed') ? list : undefined;
    }, 'the VerificationFailed Event');
    expect(reasons).toContain('VerificationWorkerNotStarted');
  });
});
