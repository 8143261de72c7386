// The controller against the real apiserver and scheduler: attempts that fail without the worker
// ever running (not scheduled, not started), retries with backoff, the failed verdict, and that a
// failed node keeps its taint.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { countReasons, harness, progressOf, nodeEventsWhen, readNode, waitFor, workerPods, type Harness } from '../../../../test/harness.js';
import { k8s } from '@kube-node-ready/sandbox';
import { core, createNamespace, sandbox } from '../../../../../../test/sandbox.js';

/** Puts this test's verification taint on a node (added after its filler pod was placed). */
async function patchTaint(node: string): Promise<void> {
  const taints = (await core().readNode({ name: node })).spec?.taints ?? [];
  await core().patchNode({ name: node, body: [{ op: 'add', path: '/spec/taints', value: [...taints, h.taint] }] }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch));
}

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlfail');
});

// A test that fails before its own ctl.stop() must not leave its controller leading into the next.
afterEach(async () => {
  await h.stopAll();
});

afterAll(async () => {
  await h?.cleanup();
});

describe('attempts that never run', () => {
  it('a worker that cannot be scheduled is a failed attempt with its own reason; after the retries the node is failed and keeps its taint', async () => {
    // A node too small for the worker's request (50m CPU): Ready and without other taints, so the
    // worker is launched, and the scheduler refuses it. (A node with another startup taint waits
    // instead, without an attempt: verification.sandbox.test.ts.)
    const node = await h.addNode({ cpu: '10m' });
    // Long enough for the scheduler's reason to reach the pod before the attempt is given up.
    const ctl = await h.start({ worker: { scheduleTimeout: '8s' } });

    // The Node is written before the NodeVerification: read after the verdict, it has the taints.
    const failed = await waitFor(
      async () => ((await progressOf(node))['phase'] === 'Failed' ? readNode(node) : undefined),
      'the node to be marked failed',
      40_000,
    );
    const a = await progressOf(node); // the NodeVerification of this node UID
    expect(a['attempt']).toBe('2'); // 1 + maxRetries
    expect(a['failures']).toBe('2');
    expect(a['last-outcome']).toBe('NotScheduled');
    // The scheduler's message says why.
    expect(a['last-message']).toMatch(/^the worker pod was not scheduled within 8s: 0\/\d+ nodes are available: .*Insufficient cpu/);
    // Our taint stays, the failed taint is added (Karpenter stops counting the node as capacity); no verified label.
    expect(failed.spec?.taints?.map((t) => t.key)).toEqual([h.taint.key, 'kube-node-ready.io/verification-failed']);
    expect(failed.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();

    // The condition says why (written right after the progress).
    const condition = await waitFor(
      async () => (await readNode(node))?.status?.conditions?.find((c) => c.type === h.conditionType && c.reason === 'RetriesExhausted'),
      'the RetriesExhausted condition',
    );
    expect(condition).toMatchObject({ status: 'False', reason: 'RetriesExhausted' });
    expect(condition?.message).toMatch(/^verification failed after 2 attempts; last: NotScheduled: the worker pod was not scheduled/);

    // Events: one per failure, and the verdict; visible as kubectl describe node finds them.
    const events = await nodeEventsWhen(
      node,
      (list) => (countReasons(list).VerificationFailed ?? 0) >= 1 && (countReasons(list).VerificationWorkerNotScheduled ?? 0) >= 2,
      'the failure Events',
    );
    const counts = countReasons(events);
    expect(counts).toEqual({ VerificationWorkerNotScheduled: 2, VerificationFailed: 1 });
    expect(events.every((e) => e.involvedObject.uid === node && e.involvedObject.kind === 'Node')).toBe(true);

    // Pods that never finished are not kept.
    await waitFor(async () => (await workerPods(h.namespace, node)).length === 0, 'the unscheduled worker pods to be deleted');

    // Metrics on the controller.
    const text = await ctl.metrics();
    expect(text).toContain(`kube_node_ready_verification_status{node="${node}",status="failed"} 1`);
    // Counters over every instance of the controller (restarted if a loaded machine costs it its Lease).
    expect(await ctl.counter('kube_node_ready_attempt_outcomes_total{outcome="NotScheduled",profile="default"}')).toBe(2);
    expect(await ctl.counter(`kube_node_ready_retry_attempts_total{node="${node}"}`)).toBe(1);
    await ctl.stop();
  });

  it('a worker that does not fit never preempts a workload (its PriorityClass says Never, as the chart creates it); a class that may preempt would have', async () => {
    // Two nodes with 100m CPU, each full with a priority-0 pod of 80m; the worker requests 50m.
    const ns = await createNamespace('ctlfill');
    const scheduling = sandbox().kc.makeApiClient(k8s.SchedulingV1Api);
    const never = `knr-${h.id}-worker`;
    const preempting = `knr-${h.id}-preempting`;
    await scheduling.createPriorityClass({ body: { metadata: { name: never }, value: 1_000_000_000, preemptionPolicy: 'Never', globalDefault: false } });
    await scheduling.createPriorityClass({ body: { metadata: { name: preempting }, value: 1_000_000_000, preemptionPolicy: 'PreemptLowerPriority', globalDefault: false } });
    try {
      const fill = async (node: string) => {
        await core().createNamespacedPod({
          namespace: ns,
          body: {
            metadata: { name: `fill-${node}` },
            spec: { nodeName: node, terminationGracePeriodSeconds: 1, containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 3600'], resources: { requests: { cpu: '80m' } } }] },
          },
        });
        await waitFor(async () => (await core().readNamespacedPod({ namespace: ns, name: `fill-${node}` })).status?.phase === 'Running', `the filler pod on ${node} to run`);
      };
      const filler = async (node: string) => (await core().listNamespacedPod({ namespace: ns })).items.find((p) => p.metadata?.name === `fill-${node}`);
      const kept = await h.addNode({ cpu: '100m', taints: [] });
      const evicted = await h.addNode({ cpu: '100m', taints: [] });
      await Promise.all([fill(kept), fill(evicted)]);
      await patchTaint(kept);
      const ctl = await h.start({ worker: { priorityClassName: never, scheduleTimeout: '8s' }, reconciliation: { maxRetries: 0 } });
      // The admission plugin gave the worker the class's value and policy.
      const worker = await waitFor(async () => (await workerPods(h.namespace, kept))[0], 'a worker pod');
      expect([worker.spec?.priority, worker.spec?.preemptionPolicy]).toEqual([1_000_000_000, 'Never']);
      const failed = await waitFor(async () => {
        const a = (await progressOf(kept));
        return a['phase'] === 'Failed' ? a : undefined;
      }, 'the node to fail (not scheduled)', 40_000);
      expect(failed['last-outcome']).toBe('NotScheduled');
      expect(failed['last-message']).toMatch(/Insufficient cpu/);
      expect((await filler(kept))?.metadata?.deletionTimestamp).toBeUndefined();
      await ctl.stop();

      // The same with a class that may preempt: the scheduler evicts the filler for the worker.
      await patchTaint(evicted);
      const other = await h.start({ worker: { priorityClassName: preempting, scheduleTimeout: '20s' }, reconciliation: { maxRetries: 0 } });
      await waitFor(async () => (await filler(evicted))?.metadata?.deletionTimestamp !== undefined || (await filler(evicted)) === undefined, 'the filler pod to be preempted', 40_000);
      await other.stop();
    } finally {
      await scheduling.deletePriorityClass({ name: never }).catch(() => undefined);
      await scheduling.deletePriorityClass({ name: preempting }).catch(() => undefined);
    }
  });

  it('a worker whose container never starts is a failed attempt ("not started"), and the retry waits for the backoff', async () => {
    const node = await h.addNode({ faults: { neverStart: true } });
    // The failure happened after the last read that did not show it and before the read that did,
    // however slow a loaded machine makes either: the backoff is bounded from both ends by them.
    let notYetAt = Date.now();
    const ctl = await h.start({ reconciliation: { maxRetries: 1, initialBackoff: '3s', maxBackoff: '3s' } });

    const firstFailure = await waitFor(
      async () => {
        const asked = Date.now();
        const a = (await progressOf(node));
        if (a['phase'] === 'Backoff') return a;
        notYetAt = asked;
        return undefined;
      },
      'the first failed attempt',
      20_000,
    );
    const seenAt = Date.now();
    expect(firstFailure['last-outcome']).toBe('NotStarted');
    const nextAt = Date.parse(firstFailure['next-attempt-at'] ?? '');
    expect(nextAt - notYetAt).toBeGreaterThan(1_000);
    expect(nextAt - seenAt).toBeLessThanOrEqual(4_500);

    const second = await waitFor(
      async () => {
        const pods = await workerPods(h.namespace, node);
        return pods.find((p) => p.metadata?.annotations?.['kube-node-ready.io/attempt'] === '2');
      },
      'the second attempt',
      20_000,
    );
    const createdAt = new Date(second.metadata?.creationTimestamp ?? 0).getTime();
    expect(createdAt).toBeGreaterThanOrEqual(nextAt - 1_000); // creationTimestamp has 1 s precision
    await waitFor(async () => (await progressOf(node))['phase'] === 'Failed', 'the node to fail', 20_000);
    await ctl.stop();
  });

  it('leaves nodes outside its selector, and nodes without its taint, alone', async () => {
    const untainted = await h.addNode({ taints: [] });
    const foreignName = `other-${h.id}`;
    await core().createNode({
      body: { metadata: { name: foreignName, labels: { 'knr-test': 'someone-else' } }, spec: { taints: [h.taint] } },
    });
    const ctl = await h.start();
    // A node it does gate, added after the others, is verified: by then it has seen them all.
    const gated = await h.addNode();
    await waitFor(async () => (await progressOf(gated))['phase'] === 'Passed', 'a gated node to pass', 60_000);
    for (const name of [untainted, foreignName]) {
      expect((await progressOf(name))['attempt'] ?? '0').toBe('0');
      expect(await workerPods(h.namespace, name)).toEqual([]);
    }
    await ctl.stop();
    await core().deleteNode({ name: foreignName });
  });

  it("leaves another installation's nodes alone while it verifies them: no condition, label, progress or worker of ours", async () => {
    // Two installations in one cluster (two Helm releases), each with its own taint, label and
    // condition type, and the progress annotations they share. This one watches every node, as a
    // release does. It must neither write its condition from the other's progress on a node it
    // leaves alone, nor take that node for its own on a later reconcile.
    const other = await harness('ctlother');
    try {
      const ctl = await h.start({ nodeManagement: { nodeSelector: '' } });
      const theirs = await other.start();
      const passing = await other.addNode();
      const failing = await other.addNode({ faults: { dns: 'dead' } });
      const phase = async (n: string) => (await progressOf(n))['phase'];
      await waitFor(async () => (await phase(passing)) === 'Passed' && (await phase(failing)) === 'Failed', "the other installation's nodes to pass and fail", 90_000);
      // Every change of theirs was a watch event here: give the last ones time to be reconciled.
      await new Promise((r) => setTimeout(r, 3_000));
      for (const name of [passing, failing]) {
        const n = await readNode(name);
        expect((n?.status?.conditions ?? []).map((c) => c.type)).not.toContain(h.conditionType);
        expect(n?.metadata?.labels ?? {}).not.toHaveProperty(h.verifiedLabel.key);
        expect(await workerPods(h.namespace, name)).toEqual([]);
      }
      expect((await progressOf(failing))).toMatchObject({ attempt: '2', phase: 'Failed' });
      expect(ctl.logs.filter((l) => l.msg === 'started worker pod')).toEqual([]);
      expect(await ctl.metrics()).not.toContain(`node="${passing}"`);
      await theirs.stop();
      await ctl.stop();
    } finally {
      await other.cleanup();
    }
  });
});
