// A controller whose node cache is behind the apiserver. The cache is made stale on purpose: the
// controller talks through the sandbox's fault proxy with its watches stalled, so its caches hold
// what its first list returned and nothing after, while the test (and the controller's own writes)
// move the live node on. Whatever the cache says, the stored progress must never go backwards,
// no second worker may run beside a live one, and a write of ours must not be redone.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import type { FaultProxy } from '../../../../../sandbox/src/fault-proxy.js';
import { KubeLeaseClient } from '../../../leader/lease-client.js';
import { harness, progressOf, readNode, throughFaultProxy, waitFor, workerPods, type Harness, type TestController } from '../../../../test/harness.js';
import { core, sandbox } from '../../../../../../test/sandbox.js';
import { silentLogger } from '@kube-node-ready/core';
import { installationOf, newNodeVerification, statusOf } from '../../../api/nodeverification.js';
import { realClock } from '../../../clock.js';
import { KubeClient } from '../../../kube/client.js';
import { desiredCondition } from './condition.js';
import { workerPodName } from './naming.js';
import { Outcome, Phase, type VerificationState } from './types.js';
import { buildWorkerPod, configHash, workerConfigDocument, workerImage } from './pod-spec.js';

let h: Harness;
let proxy: FaultProxy;
let kubeConfig: k8s.KubeConfig;

beforeAll(async () => {
  h = await harness('ctlstale');
  ({ proxy, kubeConfig } = await throughFaultProxy(h));
});

afterEach(async () => {
  await h.cleanup();
  proxy.set({});
  proxy.cutAll(); // stalled watch streams stay open otherwise
});

afterAll(async () => {
  await h?.cleanup();
  await proxy?.close();
});

const podNames = async (node: string) => (await workerPods(h.namespace, node)).map((p) => p.metadata?.name).sort();

/**
 * Holds the Lease as the previous leader (played by the test) would, until `stepDown()` (an earlier
 * test's Lease of this harness goes first).
 */
async function previousLeader(): Promise<{ stepDown: () => Promise<void> }> {
  const coordination = sandbox().kc.makeApiClient(k8s.CoordinationV1Api);
  await coordination.deleteNamespacedLease({ name: `knr-${h.id}`, namespace: h.namespace }).catch(() => undefined);
  const lease = new KubeLeaseClient(coordination, h.namespace, `knr-${h.id}`);
  const held = await lease.create({ holderIdentity: 'previous-leader', leaseDurationSeconds: 60, renewTime: Date.now(), leaseTransitions: 0 });
  return {
    stepDown: async () => {
      await lease.update({ ...held.record, holderIdentity: '', leaseDurationSeconds: 1 }, held.resourceVersion);
    },
  };
}

/**
 * A node of this test once its kubelet has reported it Ready: a copy listed before that would never
 * become launchable while the watches are stalled, and no worker would be started from it.
 */
async function addReadyNode(): Promise<string> {
  const node = await h.addNode({ faults: { neverStart: true } });
  await waitFor(async () => (await readNode(node))?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'), `${node} to be Ready`);
  return node;
}

/** A controller through the proxy whose node watch stalls once its first list is done (its pod watch keeps going). */
async function startWithStalledNodeWatch(overrides: object, name: string): Promise<TestController> {
  const watches = () => proxy.requestsByKind()['watch nodes'] ?? 0;
  const before = watches();
  proxy.set({ stallWatches: ['nodes'] });
  const ctl = await h.start(overrides, name, { kubeConfig });
  await waitFor(async () => watches() > before, 'its node watch to start (after its list)', 15_000);
  return ctl;
}

/**
 * The worker pod of `attempt` the previous leader started for `node`, and the progress it had
 * recorded in its NodeVerification before (`stored`: the earlier attempts; none before the first).
 * The attempt in flight itself is not written (ADR 0006). Returns the pod and the progress as
 * progressOf() reads it.
 */
async function previousLeadersAttempt(
  node: string,
  overrides: object,
  attempt: number,
  stored?: Omit<VerificationState, 'uid'>,
): Promise<{ pod: k8s.V1Pod; progress: Record<string, string> }> {
  const live = (await readNode(node)) as k8s.V1Node;
  const uid = live.metadata?.uid ?? '';
  const cfg = h.config(overrides);
  const body = buildWorkerPod({ node: live, attempt, podName: workerPodName(node, uid, attempt), config: cfg, image: workerImage(cfg.worker.image, 'dev'), configHash: configHash(workerConfigDocument(cfg.worker)) });
  const pod = await core().createNamespacedPod({ namespace: h.namespace, body });
  if (stored) {
    const state: VerificationState = { uid, ...stored };
    const kube = new KubeClient(sandbox().kc, { qps: 50, burst: 50, clock: realClock, log: silentLogger() });
    const fresh = newNodeVerification(live, installationOf(cfg.nodeManagement.condition.type));
    await kube.createNodeVerification({ ...fresh, status: statusOf(state, live, desiredCondition(state, cfg), fresh, Date.now()) });
  }
  return { pod, progress: await progressOf(node) };
}

describe('a node cache behind the apiserver', () => {
  it("a new leader whose cache has not seen the previous leader's progress neither restarts the count nor starts a second worker", async () => {
    const overrides = { worker: { startTimeout: '30s' }, reconciliation: { maxRetries: 3 } };
    const previous = await previousLeader();

    // The new replica lists the node before the previous leader has written anything to it; then
    // its watches go silent, so its cache keeps that copy: tainted, none of our annotations.
    const node = await addReadyNode();
    proxy.set({ stallWatches: true });
    const ctl = await h.start(overrides, 'new-leader', { kubeConfig });
    expect(ctl.running.isLeader()).toBe(false);

    // Meanwhile the previous leader ran attempt 1 (it failed) and started attempt 2, whose worker is live.
    const { pod: attempt2, progress } = await previousLeadersAttempt(node, overrides, 2, {
      attempt: 1,
      failures: 1,
      phase: Phase.Backoff,
      nextAttemptAt: Date.now(),
      lastAttempt: 1,
      lastOutcome: Outcome.NotStarted,
      lastMessage: 'the worker container did not start (written by the previous leader)',
    });
    expect(progress).toMatchObject({ attempt: '1', failures: '1', phase: 'Backoff', 'last-outcome': 'NotStarted' });

    // The previous leader steps down; the new one takes over with its stale cache and reconciles.
    await previous.stepDown();
    await waitFor(async () => ctl.running.isLeader(), 'the new replica to lead', 15_000);
    await waitFor(async () => ctl.logs.some((l) => l.node === node && (l.msg === 'waiting' || l.msg === 'started worker pod')), 'the new leader to reconcile the node', 15_000);

    // The progress the previous leader wrote stands: not overwritten by a restart at attempt 1.
    const after = await progressOf(node);
    expect(after).toMatchObject(progress);
    // Only the live worker of attempt 2 runs: the new leader read the NodeVerifications live before
    // its first reconcile, and attempt 2's pod has its name.
    await waitFor(async () => (await podNames(node)).length === 1, 'one worker pod for the node', 5_000).catch(() => undefined);
    expect(await podNames(node)).toEqual([attempt2.metadata?.name]);
    expect(ctl.logs.filter((l) => l.node === node && l.msg === 'started worker pod')).toEqual([]);
    expect(await ctl.metrics()).toContain('kube_node_ready_controller_reconcile_errors_total 0');
  });

  it("a new leader whose node watch lags its pod watch keeps the previous leader's worker for a node it has not seen yet", async () => {
    const overrides = { worker: { startTimeout: '30s' } };
    const previous = await previousLeader();
    const ctl = await startWithStalledNodeWatch(overrides, 'lagging-nodes');
    const stalledBefore = proxy.stats().stalled;

    // Then a node joins, and the previous leader records attempt 1 and starts its worker.
    const node = await h.addNode({ faults: { neverStart: true } });
    await waitFor(async () => proxy.stats().stalled > stalledBefore, 'the node event to be held back from the new replica', 15_000);
    const { pod: created } = await previousLeadersAttempt(node, overrides, 1);

    // The previous leader steps down. The pod's event names a node the new leader's cache lacks:
    // it reads the node live and follows the attempt, instead of deleting the worker as an orphan.
    await previous.stepDown();
    await waitFor(async () => ctl.running.isLeader(), 'the new replica to lead', 15_000);
    await waitFor(async () => ctl.logs.some((l) => l.node === node && l.msg === 'waiting' && l.attempt === 1), 'the new leader to wait on attempt 1', 15_000);
    expect(ctl.logs.filter((l) => l.node === node && l.msg === 'node is gone; deleted its worker pods')).toEqual([]);
    expect((await workerPods(h.namespace, node)).map((p) => p.metadata?.uid)).toEqual([created.metadata?.uid]);
    expect(await progressOf(node)).toEqual({}); // followed from the pod, nothing written
  });

  it('a new leader whose cache still has a node deleted and re-created under the same name keeps the new node\'s worker', async () => {
    const overrides = { worker: { startTimeout: '30s' } };
    const previous = await previousLeader();
    const node = await h.addNode({ faults: { neverStart: true } });
    const oldUid = (await readNode(node))?.metadata?.uid;
    const ctl = await startWithStalledNodeWatch(overrides, 'stale-uid');

    // The node is deleted and created again under its name; the new replica's cache keeps the old one.
    await core().deleteNode({ name: node });
    await waitFor(async () => (await readNode(node)) === undefined || undefined, 'the old node to be gone');
    await h.addNode({ name: node, faults: { neverStart: true } });
    const newUid = (await readNode(node))?.metadata?.uid;
    expect(newUid).not.toBe(oldUid);
    // The previous leader starts attempt 1 for the new node.
    const { pod: created } = await previousLeadersAttempt(node, overrides, 1);

    // Seen from the old copy, that worker belongs to another node UID: an older node's, to clean
    // up. It was created after the copy's node, so the live node is asked first, and it is the new one.
    await previous.stepDown();
    await waitFor(async () => ctl.running.isLeader(), 'the new replica to lead', 15_000);
    await waitFor(async () => ctl.logs.some((l) => l.node === node && l.msg === 'waiting' && l.attempt === 1), 'the new leader to wait on attempt 1', 15_000);
    expect(ctl.logs.filter((l) => l.node === node && l.msg === 'started worker pod')).toEqual([]);
    const pods = await workerPods(h.namespace, node);
    expect(pods.map((p) => [p.metadata?.uid, p.metadata?.deletionTimestamp])).toEqual([[created.metadata?.uid, undefined]]);
    expect((await readNode(node))?.metadata?.uid).toBe(newUid);
    expect(await progressOf(node)).toEqual({}); // followed from the pod, nothing written
  });

  it('a reconcile after our own write, before the watch delivers it, neither redoes nor re-reads it', async () => {
    // The controller lists the node, then hears nothing more: every later copy of the node it
    // knows of comes from its own writes.
    const node = await addReadyNode();
    proxy.set({ stallWatches: true });
    const ctl = await h.start({ worker: { scheduleTimeout: '30s', startTimeout: '30s' }, reconciliation: { resyncInterval: '1s' } }, 'lagging', { kubeConfig });

    const started = await waitFor(async () => ctl.logs.find((l) => l.node === node && l.msg === 'started worker pod'), 'attempt 1 to start', 15_000);
    expect(started.attempt).toBe(1);
    const before = proxy.requestsByKind();
    const reconciles = () => ctl.logs.filter((l) => l.node === node && (l.msg === 'waiting' || l.msg === 'started worker pod')).length;
    const seen = reconciles();

    // The resync reconciles the node again (twice, to be sure) while the cache still has the copy without progress.
    await waitFor(async () => reconciles() >= seen + 2, 'the resync to reconcile the node again', 10_000);
    const after = proxy.requestsByKind();
    const delta = (kind: string) => (after[kind] ?? 0) - (before[kind] ?? 0);
    const verificationRequests = Object.keys(after).filter((k) => k.includes('nodeverifications') && !/^(watch|list)/.test(k)).reduce((n, k) => n + delta(k), 0);
    expect({ createPods: delta('create pods'), patchNodes: delta('patch nodes'), getNodes: delta('get nodes'), verificationRequests }).toEqual({ createPods: 0, patchNodes: 0, getNodes: 0, verificationRequests: 0 });
    expect(ctl.logs.filter((l) => l.node === node && l.msg === 'started worker pod')).toHaveLength(1);
    expect(await progressOf(node)).toEqual({}); // the attempt in flight is not written
    expect(await podNames(node)).toHaveLength(1);
  });
});
