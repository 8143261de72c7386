// The controller against the real apiserver and scheduler: attempts that fail without the worker
// ever running (not scheduled, not started), retries with backoff, the failed verdict, and that a
// failed node keeps its taint.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { annotations, countReasons, harness, nodeEventsWhen, readNode, waitFor, workerPods, type Harness } from '../../../../test/harness.js';
import { core } from '../../../../../../test/sandbox.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlfail');
});

afterAll(async () => {
  await h?.cleanup();
});

describe('attempts that never run', () => {
  it('a worker that cannot be scheduled is a failed attempt with its own reason; after the retries the node is failed and keeps its taint', async () => {
    // Another startup taint the worker does not tolerate (a CNI agent's, say): the scheduler refuses it.
    const cni = { key: 'node.example.com/cni-not-ready', value: 'true', effect: 'NoSchedule' };
    const node = await h.addNode({ taints: [h.taint, cni] });
    // Long enough for the scheduler's reason to reach the pod before the attempt is given up.
    const ctl = await h.start({ worker: { scheduleTimeout: '8s' } });

    const failed = await waitFor(
      async () => {
        const n = await readNode(node);
        return annotations(n)['kube-node-ready.io/phase'] === 'Failed' ? n : undefined;
      },
      'the node to be marked failed',
      40_000,
    );
    const a = annotations(failed);
    expect(a['kube-node-ready.io/node-uid']).toBe(failed.metadata?.uid);
    expect(a['kube-node-ready.io/attempt']).toBe('2'); // 1 + maxRetries
    expect(a['kube-node-ready.io/failures']).toBe('2');
    expect(a['kube-node-ready.io/last-outcome']).toBe('NotScheduled');
    // The scheduler's message does not name the taint; the controller does, from the node.
    expect(a['kube-node-ready.io/last-message']).toMatch(
      /^the worker pod was not scheduled within 8s: the node has taint node\.example\.com\/cni-not-ready=true:NoSchedule, which the worker does not tolerate \(scheduler: 0\/\d+ nodes are available: .*untolerated taint/,
    );
    // Taints: ours and the CNI's stay, in place; no verified label.
    expect(failed.spec?.taints?.map((t) => t.key)).toEqual([h.taint.key, cni.key]);
    expect(failed.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();

    // The condition says why (written right after the progress).
    const condition = await waitFor(
      async () => (await readNode(node))?.status?.conditions?.find((c) => c.type === h.conditionType && c.reason === 'RetriesExhausted'),
      'the RetriesExhausted condition',
    );
    expect(condition).toMatchObject({ status: 'False', reason: 'RetriesExhausted' });
    expect(condition?.message).toMatch(/^verification failed after 2 attempts; last: NotScheduled: the worker pod was not scheduled/);

    // Events: one per attempt start, one per failure, and the verdict; visible as kubectl describe node finds them.
    const events = await nodeEventsWhen(
      node,
      (list) => (countReasons(list).VerificationFailed ?? 0) >= 1 && (countReasons(list).VerificationWorkerNotScheduled ?? 0) >= 2,
      'the failure Events',
    );
    const counts = countReasons(events);
    expect(counts).toEqual({ VerificationStarted: 2, VerificationWorkerNotScheduled: 2, VerificationFailed: 1 });
    expect(events.every((e) => e.involvedObject.uid === node && e.involvedObject.kind === 'Node')).toBe(true);

    // Pods that never finished are not kept.
    await waitFor(async () => (await workerPods(h.namespace, node)).length === 0, 'the unscheduled worker pods to be deleted');

    // Metrics on the controller.
    const text = await ctl.metrics();
    expect(text).toContain(`kube_node_ready_verification_status{node="${node}",status="failed"} 1`);
    expect(text).toContain('kube_node_ready_attempt_outcomes_total{outcome="NotScheduled"} 2');
    expect(text).toContain(`kube_node_ready_retry_attempts_total{node="${node}"} 1`);
    await ctl.stop();
  });

  it('a worker whose container never starts is a failed attempt ("not started"), and the retry waits for the backoff', async () => {
    const node = await h.addNode({ faults: { neverStart: true } });
    const ctl = await h.start({ reconciliation: { maxRetries: 1, initialBackoff: '3s', maxBackoff: '3s' } });

    const firstFailure = await waitFor(
      async () => {
        const a = annotations(await readNode(node));
        return a['kube-node-ready.io/phase'] === 'Backoff' ? a : undefined;
      },
      'the first failed attempt',
      20_000,
    );
    expect(firstFailure['kube-node-ready.io/last-outcome']).toBe('NotStarted');
    const failedAt = Date.now();
    const nextAt = Date.parse(firstFailure['kube-node-ready.io/next-attempt-at'] ?? '');
    expect(nextAt - failedAt).toBeGreaterThan(1_000);
    expect(nextAt - failedAt).toBeLessThanOrEqual(4_500);

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
    await waitFor(async () => annotations(await readNode(node))['kube-node-ready.io/phase'] === 'Failed', 'the node to fail', 20_000);
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
    await waitFor(async () => annotations(await readNode(gated))['kube-node-ready.io/phase'] === 'Passed', 'a gated node to pass', 60_000);
    for (const name of [untainted, foreignName]) {
      expect(annotations(await readNode(name))).not.toHaveProperty('kube-node-ready.io/attempt');
      expect(await workerPods(h.namespace, name)).toEqual([]);
    }
    await ctl.stop();
    await core().deleteNode({ name: foreignName });
  });

  it("leaves another installation's nodes alone while it verifies them: no condition, label, progress or worker of ours", async () => {
    // Two installations in one cluster (two Helm releases), each with its own taint, label and
    // condition type, and the progress annotations they share. This one watches every node, as a
    // release does. It used to write its condition from the other's progress on a node it left
    // alone, then take that node for its own on the next reconcile.
    const other = await harness('ctlother');
    try {
      const ctl = await h.start({ nodeManagement: { nodeSelector: '' } });
      const theirs = await other.start();
      const passing = await other.addNode();
      const failing = await other.addNode({ faults: { dns: 'dead' } });
      const phase = async (n: string) => annotations(await readNode(n))['kube-node-ready.io/phase'];
      await waitFor(async () => (await phase(passing)) === 'Passed' && (await phase(failing)) === 'Failed', "the other installation's nodes to pass and fail", 90_000);
      // Every change of theirs was a watch event here: give the last ones time to be reconciled.
      await new Promise((r) => setTimeout(r, 3_000));
      for (const name of [passing, failing]) {
        const n = await readNode(name);
        expect((n?.status?.conditions ?? []).map((c) => c.type)).not.toContain(h.conditionType);
        expect(n?.metadata?.labels ?? {}).not.toHaveProperty(h.verifiedLabel.key);
        expect(await workerPods(h.namespace, name)).toEqual([]);
      }
      expect(annotations(await readNode(failing))).toMatchObject({ 'kube-node-ready.io/attempt': '2', 'kube-node-ready.io/phase': 'Failed' });
      expect(ctl.logs.filter((l) => l.msg === 'started worker pod')).toEqual([]);
      expect(await ctl.metrics()).not.toContain(`node="${passing}"`);
      await theirs.stop();
      await ctl.stop();
    } finally {
      await other.cleanup();
    }
  });
});
