import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ControllerConfig } from '../../../config/schema.js';
import { aNode, aWorkerPod, summaryText, testConfig, testProgress } from '../../../testing/builders.js';
import { backoffDelay, CONCURRENCY_RECHECK_MS, CONTROL_POLL_MS, decide, type Action } from './decide.js';
import { workerPodName } from './naming.js';
import { Outcome, Phase } from './types.js';

const T0 = Date.UTC(2025, 0, 1, 0, 0, 0);
const S = 1000;
const NOW = T0 + 30 * S;
const defaults = testConfig();

function run(node: V1Node, pods: V1Pod[] = [], opts: { now?: number; config?: ControllerConfig; active?: number; gates?: string[] } = {}): Action {
  const read = testProgress.read(node);
  return decide(node, pods, opts.now ?? NOW, opts.config ?? defaults, {
    state: read.kind === 'ok' ? read.state : undefined,
    slotsTaken: opts.active ?? 0,
    ...(opts.gates ? { gates: opts.gates } : {}),
  });
}

const podName = (node: V1Node, attempt: number) => workerPodName(node.metadata?.name ?? '', node.metadata?.uid ?? '', attempt);
const names = (action: Action) => action.cleanup.map((p) => p.name);

describe('decide: which nodes', () => {
  it('leaves a node without a verification taint alone', () => {
    expect(run(aNode().build())).toEqual({ kind: 'Ignore', reason: 'NotCandidate', cleanup: [] });
  });

  it('matches taints by key and effect, whatever their value', () => {
    const otherValue = aNode().tainted({ key: 'node-ready/unverified', value: 'pending', effect: 'NoSchedule' }).build();
    const otherEffect = aNode().tainted({ key: 'node-ready/unverified', value: 'true', effect: 'NoExecute' }).build();
    const otherKey = aNode().tainted({ key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' }).build();
    expect(run(otherValue).kind).toBe('Launch');
    expect(run(otherEffect)).toMatchObject({ kind: 'Ignore', reason: 'NotCandidate' });
    expect(run(otherKey)).toMatchObject({ kind: 'Ignore', reason: 'NotCandidate' });
  });

  it('verifies a node carrying any of several configured taints', () => {
    const config = testConfig({
      nodeManagement: {
        taints: [
          { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' },
          { key: 'startup-taint.cluster-autoscaler.kubernetes.io/node-ready', effect: 'NoSchedule' },
        ],
      },
    });
    const node = aNode().tainted({ key: 'startup-taint.cluster-autoscaler.kubernetes.io/node-ready', value: '', effect: 'NoSchedule' }).build();
    expect(run(node, [], { config }).kind).toBe('Launch');
  });

  it('leaves a verified node alone even if it is tainted, and removes its leftover workers', () => {
    const node = aNode().tainted().verified().withState({ attempt: 2, failures: 0, phase: Phase.Passed, verifiedAt: T0 }).build();
    const kept = aWorkerPod(node, 1).checksFailed({ dns: 'x' }).build();
    expect(run(node, [kept])).toEqual({ kind: 'Ignore', reason: 'Verified', cleanup: [{ namespace: 'kube-system', name: podName(node, 1) }] });
  });

  it('treats another value of the verified label as not verified', () => {
    expect(run(aNode().tainted().label('node-ready/verified', 'false').build()).kind).toBe('Launch');
  });

  it('stops and removes every worker of a node being deleted', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).deleting().build();
    const running = aWorkerPod(node, 1).scheduledAt(T0).runningSince(T0).build();
    expect(run(node, [running])).toEqual({ kind: 'Ignore', reason: 'NodeDeleting', cleanup: [{ namespace: 'kube-system', name: podName(node, 1) }] });
  });

  it('leaves an untainted node alone that was only ever seen waiting (its taint went before an attempt)', () => {
    const waited = aNode().withState({ attempt: 0, failures: 0, phase: Phase.Waiting }).build();
    expect(run(waited)).toMatchObject({ kind: 'Ignore', reason: 'NotCandidate' });
    // With an attempt behind it, the verification goes on without the taint.
    expect(run(aNode().withState({ attempt: 2, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0 }).build()).kind).toBe('Launch');
  });

  it('records the worker pod, and when the node became launchable and was first launched, in the attempt it starts', () => {
    const first = run(aNode().tainted().build());
    expect(first).toMatchObject({ kind: 'Launch', state: { pod: `kube-system/${podName(aNode().build(), 1)}`, launchableAt: NOW, firstLaunchAt: NOW } });
    // A retry keeps the verification's times; a re-verification after a pass starts them again.
    const retried = aNode().tainted().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0, launchableAt: T0, firstLaunchAt: T0 }).build();
    expect(run(retried)).toMatchObject({ kind: 'Launch', attempt: 2, state: { launchableAt: T0, firstLaunchAt: T0 } });
    const again = aNode().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: T0, launchableAt: T0, firstLaunchAt: T0 }).build();
    expect(run(again)).toMatchObject({ kind: 'Launch', attempt: 2, state: { launchableAt: NOW, firstLaunchAt: NOW, verifiedAt: T0 } });
  });

  it('a node that waited in line for a slot records when it first became launchable (the controller\'s launchableSince), not when it launched', () => {
    const node = aNode().tainted().build();
    const launched = decide(node, [], NOW, defaults, { state: undefined, slotsTaken: 0, launchableSince: NOW - 20 * S });
    expect(launched).toMatchObject({ kind: 'Launch', state: { launchableAt: NOW - 20 * S, firstLaunchAt: NOW } });
  });

  it('waits without writing while a control run judges failed checks most new nodes share, then records the verdict it is given', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const dns = { name: 'dns', ok: false, durationMs: 1000, error: 'timeout', target: '10.96.0.10:53' };
    const pod = aWorkerPod(node, 1).exited(1, summaryText([dns])).build();
    const shared = { check: 'dns', target: '10.96.0.10:53', nodes: 3, passedSince: 0, most: true };
    const judgement = { shared: [shared], direct: [], most: [shared], windowMs: 600_000 };
    const state = { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Verifying };
    const pending = decide(node, [pod], NOW, defaults, { state, slotsTaken: 0, judgement: { ...judgement, control: 'pending' } });
    expect(pending).toMatchObject({ kind: 'Wait', reason: 'ControlRun', attempt: 1, requeueAfterMs: CONTROL_POLL_MS });
    expect(pending).not.toHaveProperty('persist');
    const failedToo = decide(node, [pod], NOW, defaults, { state, slotsTaken: 0, judgement: { ...judgement, control: { kind: 'failed', node: 'v1', checks: ['dns'], message: 'timeout' } } });
    expect(failedToo).toMatchObject({ kind: 'Complete', result: { outcome: Outcome.ClusterWide }, state: { failures: 0, phase: Phase.Backoff }, clusterWide: { blamed: [{ check: 'dns' }] } });
    const passedThere = decide(node, [pod], NOW, defaults, { state, slotsTaken: 0, judgement: { ...judgement, control: { kind: 'passed', node: 'v1', checks: ['dns'] } } });
    expect(passedThere).toMatchObject({ kind: 'Complete', result: { outcome: Outcome.ChecksFailed, message: expect.stringMatching(/^control run: dns against 10\.96\.0\.10:53 passed on verified node v1/) }, state: { failures: 1 } });
  });

  it('re-verifies a node whose verified label was removed, keeping the taint off', () => {
    const node = aNode().withState({ attempt: 3, failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed, verifiedAt: T0 }).withCondition('True').build();
    expect(run(node)).toMatchObject({
      kind: 'Launch',
      attempt: 4,
      state: { attempt: 4, failures: 0, phase: Phase.Verifying, verifiedAt: T0 },
    });
  });

  it('verifies untainted nodes only when asked to', () => {
    const config = testConfig({ nodeManagement: { verifyUntaintedNodes: true } });
    expect(run(aNode().build(), [], { config }).kind).toBe('Launch');
    expect(run(aNode().verified().build(), [], { config }).kind).toBe('Ignore');
  });
});

describe('decide: launching', () => {
  it('starts attempt 1 with a deterministic pod name and a deadline to look again', () => {
    const node = aNode().tainted().build();
    expect(run(node)).toEqual({
      kind: 'Launch',
      attempt: 1,
      podName: podName(node, 1),
      state: { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Verifying, pod: `kube-system/${podName(node, 1)}`, launchableAt: NOW, firstLaunchAt: NOW },
      cleanup: [],
      requeueAfterMs: defaults.worker.scheduleTimeout,
    });
  });

  it('never sends a worker to a node that is not Linux (kubernetes.io/os): it waits, reported, and its pods go', () => {
    const windows = aNode().tainted().label('kubernetes.io/os', 'windows');
    const node = windows.build();
    const pod = aWorkerPod(node, 1).createdAt(T0).build();
    expect(run(node, [pod])).toEqual({ kind: 'Wait', reason: 'UnsupportedOS', cleanup: [{ namespace: pod.metadata?.namespace, name: pod.metadata?.name }] });
    expect(run(aNode().label('kubernetes.io/os', 'windows').build())).toMatchObject({ kind: 'Ignore', reason: 'NotCandidate' });
    expect(run(windows.verified().build())).toMatchObject({ kind: 'Ignore', reason: 'Verified' });
    expect(run(aNode().tainted().label('kubernetes.io/os', 'linux').build()).kind).toBe('Launch');
  });

  it('waits for a free slot when the cluster-wide bound is reached', () => {
    const config = testConfig({ reconciliation: { maxConcurrentVerifications: 3 } });
    const node = aNode().tainted().build();
    expect(run(node, [], { config, active: 3 })).toEqual({ kind: 'Wait', reason: 'ConcurrencyLimit', requeueAfterMs: CONCURRENCY_RECHECK_MS, cleanup: [] });
    expect(run(node, [], { config, active: 2 }).kind).toBe('Launch');
  });

  it('lets an attempt already in flight finish even when the bound is reached', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const pod = aWorkerPod(node, 1).createdAt(T0).build();
    expect(run(node, [pod], { active: 1_000 })).toMatchObject({ kind: 'Wait', reason: 'Scheduling' });
  });

  it('never reuses an attempt number, even when the stored state was wiped', () => {
    // Its NodeVerification deleted by hand; a finished pod of attempt 3 is still there. Its result was
    // never recorded as far as the node says, so it is recorded now, and the next attempt is 4.
    const node = aNode().tainted().build();
    const kept = aWorkerPod(node, 3).checksFailed({ dns: 'x' }).build();
    const first = run(node, [kept]);
    expect(first).toMatchObject({ kind: 'Complete', attempt: 3, state: { attempt: 3, failures: 1, phase: Phase.Backoff } });

    const after = aNode().tainted().withState({ ...(first as { state: { attempt: number; failures: number } }).state, phase: Phase.Backoff, nextAttemptAt: NOW }).build();
    expect(run(after, [kept])).toMatchObject({ kind: 'Launch', attempt: 4, podName: podName(node, 4) });
  });

  it('ignores state written for another node UID (a node re-created with the same name)', () => {
    const node = aNode().tainted().withState({ uid: 'old-uid', attempt: 6, failures: 6, phase: Phase.Failed }).build();
    const oldPod = aWorkerPod(aNode().uid('old-uid').build(), 6).checksFailed({ dns: 'x' }).build();
    expect(testProgress.read(node).kind).toBe('none');
    expect(run(node, [oldPod])).toMatchObject({
      kind: 'Launch',
      attempt: 1,
      state: { uid: 'uid-node-1', attempt: 1, failures: 0 },
      cleanup: [{ name: oldPod.metadata?.name }],
    });
  });
});

describe('decide: launching only on a node that can run the worker', () => {
  const BRING_UP = defaults.nodeManagement.bringUpTimeout;
  const created = NOW - 20 * S;
  const cni = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };

  it('waits, without an attempt, while the node is NotReady, naming the reason, until its bring-up deadline; only booting: nothing else blocks it', () => {
    const node = aNode().tainted().createdAt(created).notReady('KubeletNotReady', 'container runtime network not ready').build();
    expect(run(node)).toEqual({
      kind: 'Wait',
      reason: 'NodeNotLaunchable',
      waitingFor: ['Ready (NotReady: KubeletNotReady: container runtime network not ready)'],
      overdue: false,
      requeueAfterMs: created + BRING_UP - NOW,
      cleanup: [],
      bootingOnly: true,
    });
    // A taint the worker does not tolerate is not the node's own bring-up.
    expect(run(aNode().tainted().createdAt(created).notReady('KubeletNotReady', 'x').withTaints(cni).build())).not.toHaveProperty('bootingOnly');
  });

  it('waits while the kubelet has not reported any status, or the node controller lost it (Unknown)', () => {
    expect(run(aNode().tainted().createdAt(created).withoutReady().build())).toMatchObject({ reason: 'NodeNotLaunchable', waitingFor: ['Ready (the kubelet has not reported the node status yet)'] });
    expect(run(aNode().tainted().createdAt(created).notReady('NodeStatusUnknown', 'Kubelet stopped posting node status.', 'Unknown').build())).toMatchObject({
      reason: 'NodeNotLaunchable',
      waitingFor: ['Ready (Unknown: NodeStatusUnknown: Kubelet stopped posting node status.)'],
    });
  });

  it("waits for another agent's startup taint, Karpenter's and the cloud provider's, and names them all", () => {
    const node = aNode()
      .tainted()
      .createdAt(created)
      .withTaints(cni, { key: 'karpenter.sh/unregistered', effect: 'NoExecute' }, { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' })
      .build();
    expect(run(node)).toMatchObject({
      reason: 'NodeNotLaunchable',
      waitingFor: [
        'taints node.cilium.io/agent-not-ready=true:NoSchedule, karpenter.sh/unregistered:NoExecute, node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule removed (the worker does not tolerate them)',
      ],
    });
  });

  it('launches beside taints the worker tolerates (configured tolerations, PreferNoSchedule, the node lifecycle taints that shadow Ready)', () => {
    const config = testConfig({ worker: { tolerations: [{ key: cni.key, operator: 'Exists', effect: 'NoSchedule' }] } });
    const node = aNode()
      .tainted()
      .createdAt(created)
      .withTaints(cni, { key: 'example.com/soft', value: 'x', effect: 'PreferNoSchedule' }, { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' })
      .build();
    expect(run(node, [], { config }).kind).toBe('Launch');
    expect(run(node)).toMatchObject({ reason: 'NodeNotLaunchable', waitingFor: ['taint node.cilium.io/agent-not-ready=true:NoSchedule removed (the worker does not tolerate it)'] });
  });

  it('says both when the node is NotReady and tainted; uses no verification slot meanwhile', () => {
    const config = testConfig({ reconciliation: { maxConcurrentVerifications: 1 } });
    const node = aNode().tainted().createdAt(created).notReady().withTaints(cni).build();
    expect(run(node, [], { config, active: 1 })).toMatchObject({ reason: 'NodeNotLaunchable', waitingFor: [expect.stringMatching(/^Ready \(NotReady/), expect.stringMatching(/^taint node\.cilium\.io/)] });
  });

  it('is overdue past nodeManagement.bringUpTimeout after the node was created (no requeue: only a node change can end it)', () => {
    const node = aNode().tainted().createdAt(NOW - BRING_UP).notReady().build();
    const action = run(node);
    expect(action).toMatchObject({ kind: 'Wait', reason: 'NodeNotLaunchable', overdue: true });
    expect(action).not.toHaveProperty('requeueAfterMs');
  });

  it('lets an attempt in flight go on when the node turns NotReady (its own deadlines decide), and waits again after it', () => {
    const verifying = aNode().tainted().notReady().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    expect(run(verifying, [aWorkerPod(verifying, 1).createdAt(T0).build()])).toMatchObject({ kind: 'Wait', reason: 'Scheduling', attempt: 1 });
    const backoff = aNode().tainted().notReady().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: NOW - S }).build();
    expect(run(backoff)).toMatchObject({ kind: 'Wait', reason: 'NodeNotLaunchable' });
  });
});

describe('decide: following an attempt', () => {
  const verifying = (attempt: number, failures = attempt - 1) =>
    aNode().tainted().withState({ attempt, failures, phase: Phase.Verifying }).build();

  it.each([
    ['scheduling', (n: V1Node) => aWorkerPod(n, 1).createdAt(T0).build(), 'Scheduling', 90 * S],
    ['starting', (n: V1Node) => aWorkerPod(n, 1).createdAt(T0).scheduledAt(T0).waiting('ContainerCreating').build(), 'Starting', 150 * S],
    ['running', (n: V1Node) => aWorkerPod(n, 1).createdAt(T0).scheduledAt(T0).runningSince(T0 + 10 * S).build(), 'Running', 55 * S],
  ])('waits while the worker is %s, until its next deadline', (_name, build, reason, requeueAfterMs) => {
    const node = verifying(1);
    expect(run(node, [build(node)])).toEqual({ kind: 'Wait', reason, requeueAfterMs, attempt: 1, cleanup: [] });
  });

  it('adopts a pod newer than the stored state (created just before a restart) instead of starting another', () => {
    const node = aNode().tainted().build();
    const pod = aWorkerPod(node, 1).createdAt(T0).build();
    expect(run(node, [pod])).toEqual({
      kind: 'Wait',
      reason: 'Scheduling',
      requeueAfterMs: 90 * S,
      attempt: 1,
      adopt: { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Verifying, pod: `kube-system/${podName(node, 1)}`, firstLaunchAt: T0 },
      cleanup: [],
    });
  });

  it('adopts a newer pod during backoff, keeping the failure count', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0 }).build();
    const pod = aWorkerPod(node, 2).checksFailed({ dns: 'x' }).build();
    expect(run(node, [pod])).toMatchObject({ kind: 'Complete', attempt: 2, state: { failures: 2, phase: Phase.Backoff } });
  });

  it('opens the node when the worker passed, and deletes its pod and older kept ones', () => {
    const node = verifying(2);
    const old = aWorkerPod(node, 1).checksFailed({ dns: 'x' }).build();
    const pod = aWorkerPod(node, 2).passed().build();
    const action = run(node, [old, pod]);
    expect(action).toMatchObject({
      kind: 'Complete',
      attempt: 2,
      pod: { namespace: 'kube-system', name: podName(node, 2) },
      result: { outcome: Outcome.Passed },
      state: { uid: 'uid-node-1', attempt: 2, failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed, verifiedAt: NOW },
      open: true,
      deletePod: true,
    });
    expect(names(action)).toEqual([podName(node, 1)]);
    expect(action).not.toHaveProperty('requeueAfterMs');
  });

  it('waits for Karpenter to register the node before opening it', () => {
    const unregistered = aNode().tainted().inNodePool('default').withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const pod = aWorkerPod(unregistered, 1).passed().build();
    expect(run(unregistered, [pod])).toEqual({ kind: 'Wait', reason: 'KarpenterRegistration', attempt: 1, cleanup: [] });

    const registered = aNode().tainted().inNodePool('default').registered().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    expect(run(registered, [pod])).toMatchObject({ kind: 'Complete', open: true });
  });

  it('does not wait for registration on nodes Karpenter does not manage', () => {
    const node = verifying(1);
    expect(run(node, [aWorkerPod(node, 1).passed().build()])).toMatchObject({ kind: 'Complete', open: true });
  });

  it('records a failed attempt, backs off, keeps the newest failed pod and deletes older ones', () => {
    const node = verifying(2);
    const old = aWorkerPod(node, 1).checksFailed({ dns: 'x' }).build();
    const pod = aWorkerPod(node, 2).checksFailed({ dns: 'SERVFAIL' }).build();
    const action = run(node, [old, pod]);
    expect(action).toMatchObject({
      kind: 'Complete',
      attempt: 2,
      result: { outcome: Outcome.ChecksFailed, failedChecks: ['dns'], message: 'check failed: dns: SERVFAIL' },
      state: { attempt: 2, failures: 2, phase: Phase.Backoff, nextAttemptAt: NOW + 20 * S, lastOutcome: Outcome.ChecksFailed, lastMessage: 'check failed: dns: SERVFAIL' },
      open: false,
      deletePod: false,
      requeueAfterMs: 20 * S,
    });
    expect(names(action)).toEqual([podName(node, 1)]);
  });

  it('keeps the failing streak in the state: since its first failed attempt, the latest checks with a target; a pass ends it', () => {
    const dns = { name: 'dns', ok: false, durationMs: 1000, error: 'refused', target: '10.96.0.10:53' };
    const first = verifying(1);
    const a1 = run(first, [aWorkerPod(first, 1).exited(1, summaryText([{ name: 'api', ok: true, durationMs: 5 }, dns])).build()]);
    expect(a1).toMatchObject({ kind: 'Complete', state: { failing: { since: NOW, at: NOW, checks: { dns: '10.96.0.10:53' } } } });
    // The next attempt carries it; its failure keeps `since`, moves `at`, and names its own checks.
    const second = aNode().tainted().withState({ attempt: 2, failures: 1, phase: Phase.Verifying, failing: { since: NOW - 60 * S, at: NOW - 30 * S, checks: { dns: '10.96.0.10:53' } } }).build();
    const tcp = { name: 'tcp', ok: false, durationMs: 1000, error: 'timeout', target: '10.96.0.1:443' };
    expect(run(second, [aWorkerPod(second, 2).exited(1, summaryText([tcp])).build()])).toMatchObject({
      kind: 'Complete',
      state: { failing: { since: NOW - 60 * S, at: NOW, checks: { tcp: '10.96.0.1:443' } } },
    });
    // A failure without a target (no summary) keeps the checks it had.
    expect(run(second, [aWorkerPod(second, 2).exited(1, 'not a summary').build()])).toMatchObject({
      kind: 'Complete',
      state: { failing: { since: NOW - 60 * S, at: NOW, checks: { dns: '10.96.0.10:53' } } },
    });
    const passed = run(second, [aWorkerPod(second, 2).passed().build()]);
    expect(passed).toMatchObject({ kind: 'Complete', open: true });
    expect((passed as Extract<Action, { kind: 'Complete' }>).state).not.toHaveProperty('failing');
  });

  it('deletes failed pods at once when keepFailedPods is 0', () => {
    const config = testConfig({ worker: { keepFailedPods: 0 } });
    const node = verifying(1);
    expect(run(node, [aWorkerPod(node, 1).checksFailed({ dns: 'x' }).build()], { config })).toMatchObject({ kind: 'Complete', deletePod: true });
  });

  it('always deletes a pod that never finished, whatever keepFailedPods says', () => {
    const node = verifying(1);
    const stuck = aWorkerPod(node, 1).createdAt(T0).unschedulable().build();
    expect(run(node, [stuck], { now: T0 + 120 * S })).toMatchObject({
      kind: 'Complete',
      result: { outcome: Outcome.NotScheduled },
      deletePod: true,
    });
  });

  it('names the node\'s taints that kept an unscheduled worker off it', () => {
    const node = aNode().tainted().tainted({ key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' }).withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const stuck = aWorkerPod(node, 1).createdAt(T0).unschedulable('0/1 nodes are available: 1 node(s) had untolerated taint(s).').build();
    const action = run(node, [stuck], { now: T0 + 120 * S });
    expect(action.kind === 'Complete' && action.result.message).toBe(
      'the worker pod was not scheduled within 2m: the node has taint node.cilium.io/agent-not-ready=true:NoSchedule, which the worker does not tolerate (scheduler: 0/1 nodes are available: 1 node(s) had untolerated taint(s).)',
    );
  });

  it('counts a worker pod that disappeared as a failed attempt', () => {
    const node = verifying(1);
    expect(run(node, [])).toMatchObject({
      kind: 'Complete',
      attempt: 1,
      result: { outcome: Outcome.PodDeleted },
      state: { failures: 1, phase: Phase.Backoff },
      deletePod: false,
    });
    expect(run(node, [])).not.toHaveProperty('pod');
  });

  it('marks the node failed after 1 + maxRetries failed attempts, keeping the taint', () => {
    const node = verifying(6, 5);
    const action = run(node, [aWorkerPod(node, 6).checksFailed({ tcp: 'refused' }).build()]);
    expect(action).toMatchObject({ kind: 'Complete', open: false, state: { attempt: 6, failures: 6, phase: Phase.Failed } });
    expect(action).not.toHaveProperty('requeueAfterMs');
    expect((action as { state: object }).state).not.toHaveProperty('nextAttemptAt');
  });

  it('with maxRetries 0, fails on the first failed attempt', () => {
    const config = testConfig({ reconciliation: { maxRetries: 0 } });
    const node = verifying(1);
    expect(run(node, [aWorkerPod(node, 1).checksFailed({ dns: 'x' }).build()], { config })).toMatchObject({ state: { phase: Phase.Failed } });
  });

  it('removes unfinished pods of older attempts (orphans) and pods of another node UID', () => {
    const node = verifying(3);
    const orphan = aWorkerPod(node, 2).createdAt(T0).scheduledAt(T0).runningSince(T0).build();
    const foreign = aWorkerPod(aNode().uid('old').build(), 1).build();
    const current = aWorkerPod(node, 3).createdAt(T0).build();
    const action = run(node, [orphan, foreign, current]);
    expect(action).toMatchObject({ kind: 'Wait', reason: 'Scheduling', attempt: 3 });
    expect(names(action).sort()).toEqual([foreign.metadata?.name, podName(node, 2)].sort());
  });

  it('ignores pods of other nodes and does not delete pods already being deleted', () => {
    const node = verifying(1);
    const other = aWorkerPod(aNode('node-2').build(), 1).build();
    const going = aWorkerPod(aNode().uid('old').build(), 1).deleting().build();
    expect(run(node, [other, going, aWorkerPod(node, 1).createdAt(T0).build()])).toMatchObject({ kind: 'Wait', cleanup: [] });
  });
});

describe('decide: between attempts', () => {
  it('waits out the backoff, computed from the stored time', () => {
    const node = aNode().tainted().withState({ attempt: 2, failures: 2, phase: Phase.Backoff, nextAttemptAt: NOW + 15 * S }).build();
    expect(run(node)).toEqual({ kind: 'Wait', reason: 'Backoff', requeueAfterMs: 15 * S, cleanup: [] });
  });

  it('launches the next attempt when the backoff is over, carrying the failure count', () => {
    const node = aNode().tainted().withState({ attempt: 2, failures: 2, phase: Phase.Backoff, nextAttemptAt: NOW, lastOutcome: Outcome.ChecksFailed }).build();
    const kept = aWorkerPod(node, 2).checksFailed({ dns: 'x' }).build();
    expect(run(node, [kept])).toEqual({
      kind: 'Launch',
      attempt: 3,
      podName: podName(node, 3),
      state: { uid: 'uid-node-1', attempt: 3, failures: 2, phase: Phase.Verifying, lastOutcome: Outcome.ChecksFailed, pod: `kube-system/${podName(node, 3)}`, launchableAt: NOW, firstLaunchAt: NOW },
      cleanup: [],
      requeueAfterMs: defaults.worker.scheduleTimeout,
    });
  });

  it('does nothing more for a failed node', () => {
    const node = aNode().tainted().withState({ attempt: 6, failures: 6, phase: Phase.Failed }).build();
    const kept = aWorkerPod(node, 6).checksFailed({ dns: 'x' }).build();
    expect(run(node, [kept])).toEqual({ kind: 'Ignore', reason: 'Failed', cleanup: [] });
  });
});

describe('backoffDelay', () => {
  it.each([
    [1, 10 * S],
    [2, 20 * S],
    [3, 40 * S],
    [5, 160 * S],
    [6, 300 * S],
    [50, 300 * S],
  ])('retry %d waits %d ms (10s x 2^(n-1), capped at 5m)', (failures, ms) => {
    expect(backoffDelay(failures, defaults.reconciliation)).toBe(ms);
  });

  it('follows the configured factor', () => {
    const r = testConfig({ reconciliation: { initialBackoff: '1s', backoffFactor: 3, maxBackoff: '1h' } }).reconciliation;
    expect([1, 2, 3].map((n) => backoffDelay(n, r))).toEqual([1000, 3000, 9000]);
  });
});

describe('decide: the startup timeout (nodeManagement.startupTimeout, onStartupTimeout)', () => {
  const created = NOW - 10 * 60 * S;
  const cni = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
  const withTimeout = (onStartupTimeout: 'keep' | 'open' | 'replace', startupTimeout = '5m') =>
    testConfig({ nodeManagement: { startupTimeout, onStartupTimeout, deleteFailedNodes: onStartupTimeout === 'replace' } });

  it('ends a node without a verdict at the deadline: failed, StartupTimeout, saying what it waited for; open only with "open"', () => {
    const node = aNode().tainted().withTaints(cni).createdAt(created).build();
    for (const outcome of ['keep', 'open', 'replace'] as const) {
      const action = run(node, [], { config: withTimeout(outcome) });
      expect(action, outcome).toMatchObject({
        kind: 'Complete',
        open: outcome === 'open',
        result: { outcome: Outcome.StartupTimeout, message: expect.stringContaining(`no verdict within nodeManagement.startupTimeout (5m) of the node's creation: the node still could not run the worker (waiting for: taint ${cni.key}=true:NoSchedule removed`) },
        state: { phase: Phase.Failed, lastOutcome: Outcome.StartupTimeout, failedAt: NOW, attempt: 0 },
      });
    }
  });

  it('does nothing before the deadline, or when it is 0 (the default)', () => {
    const node = aNode().tainted().withTaints(cni).createdAt(created).build();
    expect(run(node, [], { config: withTimeout('keep', '11m') })).toMatchObject({ kind: 'Wait', reason: 'NodeNotLaunchable' });
    expect(run(node)).toMatchObject({ kind: 'Wait', reason: 'NodeNotLaunchable' });
  });

  it('abandons an attempt in flight (its pod goes) and says so', () => {
    const node = aNode().tainted().createdAt(created).withState({ attempt: 2, failures: 1, phase: Phase.Verifying }).build();
    const running = aWorkerPod(node, 2).createdAt(NOW - 30 * S).scheduledAt(NOW - 29 * S).runningSince(NOW - 20 * S).build();
    const action = run(node, [running], { config: withTimeout('keep') });
    expect(action).toMatchObject({ kind: 'Complete', attempt: 2, result: { message: expect.stringContaining('attempt 2 was still running') }, state: { attempt: 2, failures: 1, phase: Phase.Failed } });
    expect(names(action)).toEqual([podName(node, 2)]);
  });

  it('is not the node\'s fault while it waits for a slot other nodes hold, or its latest attempt was inconclusive: no timeout then', () => {
    const waiting = aNode().tainted().createdAt(created).build();
    expect(run(waiting, [], { config: withTimeout('replace'), active: defaults.reconciliation.maxConcurrentVerifications })).toMatchObject({ kind: 'Wait', reason: 'ConcurrencyLimit' });
    const inconclusive = aNode()
      .tainted()
      .createdAt(created)
      .withState({ attempt: 1, failures: 0, phase: Phase.Backoff, nextAttemptAt: NOW + 5 * S, lastOutcome: Outcome.ClusterWide, lastMessage: 'dns: most nodes fail alike' })
      .build();
    expect(run(inconclusive, [], { config: withTimeout('replace') })).toMatchObject({ kind: 'Wait', reason: 'Backoff' });
  });

  it('leaves a node that already has its verdict alone', () => {
    const failed = aNode().tainted().createdAt(created).withState({ attempt: 2, failures: 2, phase: Phase.Failed, failedAt: T0 }).build();
    expect(run(failed, [], { config: withTimeout('open') })).toMatchObject({ kind: 'Ignore', reason: 'Failed' });
    const verified = aNode().tainted().verified().createdAt(created).build();
    expect(run(verified, [], { config: withTimeout('open') })).toMatchObject({ kind: 'Ignore', reason: 'Verified' });
  });
});

describe('decide: readiness gates (config gates)', () => {
  const pending = ['DaemonSet kube-system/aws-node: no pod on the node yet'];
  const before = testConfig({ gates: { mode: 'before', requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }] } });
  const parallel = testConfig({ gates: { mode: 'parallel', requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }] } });

  it('mode before: no attempt and no slot while the gates wait, naming what they wait for; overdue past bringUpTimeout', () => {
    const node = aNode().tainted().createdAt(NOW - 30 * S).build();
    expect(run(node, [], { config: before, gates: pending })).toEqual({
      kind: 'Wait',
      reason: 'GatesPending',
      waitingFor: pending,
      overdue: false,
      requeueAfterMs: before.nodeManagement.bringUpTimeout - 30 * S,
      cleanup: [],
    });
    const late = aNode().tainted().createdAt(NOW - before.nodeManagement.bringUpTimeout).build();
    expect(run(late, [], { config: before, gates: pending })).toMatchObject({ kind: 'Wait', reason: 'GatesPending', overdue: true });
    // Even with every slot taken: the node is not in line for one.
    expect(run(node, [], { config: before, gates: pending, active: before.reconciliation.maxConcurrentVerifications })).toMatchObject({ reason: 'GatesPending' });
    // They hold: the first attempt starts.
    expect(run(node, [], { config: before, gates: [] })).toMatchObject({ kind: 'Launch', attempt: 1 });
  });

  it('a node that cannot run the worker says so first (NotReady, another agent\'s taint)', () => {
    const node = aNode().tainted().notReady('KubeletNotReady', 'container runtime network not ready').build();
    expect(run(node, [], { config: before, gates: pending })).toMatchObject({ kind: 'Wait', reason: 'NodeNotLaunchable' });
  });

  it('mode parallel: the attempt starts at once; a passed attempt waits for the gates, then opens the node', () => {
    const node = aNode().tainted().build();
    expect(run(node, [], { config: parallel, gates: pending })).toMatchObject({ kind: 'Launch', attempt: 1 });
    const verifying = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const pod = aWorkerPod(verifying, 1).passed().build();
    expect(run(verifying, [pod], { config: parallel, gates: pending })).toEqual({ kind: 'Wait', reason: 'GatesPending', attempt: 1, waitingFor: pending, cleanup: [] });
    expect(run(verifying, [pod], { config: parallel, gates: [] })).toMatchObject({ kind: 'Complete', open: true, result: { outcome: Outcome.Passed } });
  });

  it('either mode: a failed attempt is recorded as usual (the gates do not hold it back)', () => {
    const verifying = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const pod = aWorkerPod(verifying, 1).checksFailed({ dns: 'no answer' }).build();
    expect(run(verifying, [pod], { config: parallel, gates: pending })).toMatchObject({ kind: 'Complete', open: false, result: { outcome: Outcome.ChecksFailed } });
  });

  it('mode before: gates that stopped holding while the attempt ran keep the passed node closed until they hold again', () => {
    const verifying = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const pod = aWorkerPod(verifying, 1).passed().build();
    expect(run(verifying, [pod], { config: before, gates: pending })).toMatchObject({ kind: 'Wait', reason: 'GatesPending', attempt: 1 });
  });

  it('the startup timeout names what the gates waited for, and is not held off by the slot rule while they wait', () => {
    const created = NOW - 10 * 60 * S;
    const config = testConfig({ gates: { requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }] }, nodeManagement: { startupTimeout: '5m' } });
    const node = aNode().tainted().createdAt(created).build();
    expect(run(node, [], { config, gates: pending, active: config.reconciliation.maxConcurrentVerifications })).toMatchObject({
      kind: 'Complete',
      result: { outcome: Outcome.StartupTimeout, message: expect.stringContaining(`no attempt had started: its readiness gates were waiting for: ${pending[0]}`) },
    });
  });
});
