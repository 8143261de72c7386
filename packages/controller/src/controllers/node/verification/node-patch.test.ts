import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { aNode, DEFAULT_TAINT, testConfig } from '../../../testing/builders.js';
import { applyJsonPatch, PatchTestFailed } from '../../../testing/json-patch.js';
import { comparableByTest, conditionPatch, escapePointer, nodePatch, taintsToRemove } from './node-patch.js';
import { readState } from './state.js';
import { Outcome, Phase, type VerificationState } from './types.js';

const T0 = Date.UTC(2025, 0, 1);
const config = testConfig();
const CILIUM = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
const GPU = { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' };
const passed: VerificationState = { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed, verifiedAt: T0 };

function open(node: V1Node, state = passed): V1Node {
  return applyJsonPatch(node, nodePatch({ node, config, state, open: true }));
}

describe('nodePatch: opening a node', () => {
  it('removes only our taints, wherever they are, and keeps everyone else\'s in order', () => {
    const node = aNode().withTaints(CILIUM, DEFAULT_TAINT, GPU, { ...DEFAULT_TAINT, effect: 'NoExecute' }).label('team', 'a').build();
    const after = open(node);
    expect(after.spec?.taints).toEqual([CILIUM, GPU, { ...DEFAULT_TAINT, effect: 'NoExecute' }]);
    expect(after.metadata?.labels).toEqual({ team: 'a', 'node-ready/verified': 'true' });
  });

  it('removes several configured taints in one write, highest index first', () => {
    const cfg = testConfig({ nodeManagement: { taints: [{ key: 'a/x', effect: 'NoSchedule' }, { key: 'b/y', effect: 'NoSchedule' }] } });
    const node = aNode().withTaints({ key: 'a/x', value: '', effect: 'NoSchedule' }, CILIUM, { key: 'b/y', value: '1', effect: 'NoSchedule' }).build();
    const ops = nodePatch({ node, config: cfg, state: passed, open: true });
    expect(ops.filter((o) => o.op === 'remove').map((o) => o.path)).toEqual(['/spec/taints/2', '/spec/taints/0']);
    expect(applyJsonPatch(node, ops).spec?.taints).toEqual([CILIUM]);
  });

  it('adds the verified label and stores the state, creating the maps a node may not have', () => {
    const node = aNode().tainted().build();
    delete node.metadata?.labels;
    delete node.metadata?.annotations;
    const after = open(node);
    expect(after.metadata?.labels).toEqual({ 'node-ready/verified': 'true' });
    expect(readState(after)).toEqual({ kind: 'ok', state: passed });
    expect(after.spec?.taints).toEqual([]);
  });

  it('is refused when the taint list changed since the node was read (never removes by a stale index)', () => {
    const read = aNode().withTaints(CILIUM, DEFAULT_TAINT).build();
    const ops = nodePatch({ node: read, config, state: passed, open: true });
    // Meanwhile the CNI agent removed its taint: our taint moved from index 1 to 0.
    const live = aNode().withTaints(DEFAULT_TAINT).build();
    expect(() => applyJsonPatch(live, ops)).toThrow(PatchTestFailed);
  });

  it('is refused when another writer moved our state on, or the node was re-created', () => {
    const read = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const ops = nodePatch({ node: read, config, state: passed, open: true });
    const movedOn = aNode().tainted().withState({ attempt: 2, failures: 1, phase: Phase.Verifying }).build();
    const recreated = aNode().uid('other').tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying, uid: 'uid-node-1' }).build();
    expect(() => applyJsonPatch(movedOn, ops)).toThrow(/attempt/);
    expect(() => applyJsonPatch(recreated, ops)).toThrow(/uid/);
  });

  it('is not disturbed by changes to fields it does not own', () => {
    const read = aNode().withTaints(DEFAULT_TAINT, CILIUM).withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const ops = nodePatch({ node: read, config, state: passed, open: true });
    const live = structuredClone(read);
    live.metadata!.resourceVersion = '999';
    live.metadata!.labels = { ...live.metadata!.labels, 'topology.kubernetes.io/zone': 'a' };
    live.spec!.taints!.push(GPU); // appended after ours: indexes of ours unchanged
    live.status!.conditions = [{ type: 'Ready', status: 'True' }];
    const after = applyJsonPatch(live, ops);
    expect(after.spec?.taints).toEqual([CILIUM, GPU]);
    expect(after.metadata?.labels).toEqual({ 'topology.kubernetes.io/zone': 'a', 'node-ready/verified': 'true' });
    expect(after.status?.conditions).toEqual([{ type: 'Ready', status: 'True' }]);
  });
});

describe('nodePatch: storing progress only', () => {
  it('writes the whole state and removes fields the new state does not have', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0 }).build();
    const next: VerificationState = { uid: 'uid-node-1', attempt: 2, failures: 1, phase: Phase.Verifying, lastOutcome: Outcome.ChecksFailed };
    const after = applyJsonPatch(node, nodePatch({ node, config, state: next, open: false }));
    expect(readState(after)).toEqual({ kind: 'ok', state: next });
    expect(after.metadata?.annotations).not.toHaveProperty('kube-node-ready.io/next-attempt-at');
    expect(after.spec?.taints).toEqual([DEFAULT_TAINT]);
    expect(after.metadata?.labels).toEqual({});
  });

  it('round-trips every field through the annotations', () => {
    const state: VerificationState = {
      uid: 'uid-node-1',
      attempt: 12,
      failures: 3,
      phase: Phase.Backoff,
      nextAttemptAt: T0 + 61_000,
      lastOutcome: Outcome.NotStarted,
      lastMessage: 'the worker container did not start within 3m of scheduling: ImagePullBackOff',
      verifiedAt: T0,
      failing: { since: T0 - 60_000, at: T0 + 30_000, checks: { dns: '10.96.0.10:53', tcp: '10.96.0.1:443' } },
    };
    const node = aNode().build();
    expect(readState(applyJsonPatch(node, nodePatch({ node, config, state, open: false })))).toEqual({ kind: 'ok', state });
  });

  it('a failing annotation it cannot read is left out (memory for the cluster-wide rule), the rest of the state is read', () => {
    for (const bad of ['{', '"x"', '{"since":"x","at":"2025-01-01T00:00:00Z","checks":{}}', '{"since":"2025-01-01T00:00:00Z","at":"2025-01-01T00:00:00Z","checks":{"dns":1}}']) {
      const node = aNode().withState({ attempt: 1, failures: 1, phase: Phase.Failed }).build();
      node.metadata!.annotations!['kube-node-ready.io/failing'] = bad;
      expect(readState(node), bad).toEqual({ kind: 'ok', state: { uid: 'uid-node-1', attempt: 1, failures: 1, phase: Phase.Failed } });
    }
  });

  it('does not test a stored message the API server cannot compare (its "<" would fail the test forever); the structured state is still tested', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0, lastMessage: 'the worker exited with code 0 but its summary is unusable: "<html>502</html>"' }).build();
    const next: VerificationState = { uid: 'uid-node-1', attempt: 2, failures: 1, phase: Phase.Verifying, lastOutcome: Outcome.WorkerError };
    const ops = nodePatch({ node, config, state: next, open: false });
    const tested = ops.filter((o) => o.op === 'test').map((o) => o.path);
    expect(tested).not.toContain('/metadata/annotations/kube-node-ready.io~1last-message');
    expect(tested).toEqual(expect.arrayContaining(['/metadata/uid', '/metadata/annotations/kube-node-ready.io~1attempt', '/metadata/annotations/kube-node-ready.io~1failures', '/metadata/annotations/kube-node-ready.io~1phase']));
    expect(readState(applyJsonPatch(node, ops))).toEqual({ kind: 'ok', state: next });
  });

  it('knows which strings a JSON patch test can compare', () => {
    for (const ok of ['', 'ChecksFailed', '2026-11-21T10:00:00.000Z', 'dns: timeout after 5s; api: 403 "Forbidden"', 'tab\tnewline\n\u0001\u007f', 'ünïcödé 🚀']) expect(comparableByTest(ok), ok).toBe(true);
    for (const bad of ['a<b', 'a>b', 'a&b', 'line\u2028sep', 'para\u2029sep', 'lone \ud800 surrogate']) expect(comparableByTest(bad), bad).toBe(false);
  });

  it('escapes JSON pointer segments', () => {
    expect(escapePointer('kube-node-ready.io/attempt')).toBe('kube-node-ready.io~1attempt');
    expect(escapePointer('a~b/c')).toBe('a~0b~1c');
  });

  it('names the taints it removes', () => {
    expect(taintsToRemove(aNode().withTaints(CILIUM, DEFAULT_TAINT).build(), config)).toEqual(['node-ready/unverified=true:NoSchedule']);
  });
});

describe('nodePatch: the failed taint', () => {
  const FAILED = { key: 'kube-node-ready.io/verification-failed', value: 'true', effect: 'NoSchedule' };
  const failedState: VerificationState = { uid: 'uid-node-1', attempt: 6, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.ChecksFailed };

  it('is appended with the Failed state, after everyone else\'s taints; a node without taints gets the list (tested absent)', () => {
    const node = aNode().withTaints(DEFAULT_TAINT, GPU).build();
    const after = applyJsonPatch(node, nodePatch({ node, config, state: failedState, open: false }));
    expect(after.spec?.taints).toEqual([DEFAULT_TAINT, GPU, FAILED]);
    expect(readState(after)).toEqual({ kind: 'ok', state: failedState });
    // Already there (a repeated write): not added twice.
    expect(applyJsonPatch(after, nodePatch({ node: after, config, state: failedState, open: false })).spec?.taints).toEqual([DEFAULT_TAINT, GPU, FAILED]);
    const bare: V1Node = { ...aNode().build(), spec: {} };
    const ops = nodePatch({ node: bare, config, state: failedState, open: false });
    expect(ops).toContainEqual({ op: 'test', path: '/spec/taints', value: null });
    expect(applyJsonPatch(bare, ops).spec?.taints).toEqual([FAILED]);
  });

  it('goes with the next write of a node that is not failed (verified again, or passing), tested at its index', () => {
    const node = aNode().withTaints(FAILED, DEFAULT_TAINT, CILIUM).build();
    const verifying: VerificationState = { uid: 'uid-node-1', attempt: 7, failures: 0, phase: Phase.Verifying };
    const ops = nodePatch({ node, config, state: verifying, open: false });
    expect(ops).toContainEqual({ op: 'test', path: '/spec/taints/0/key', value: FAILED.key });
    expect(applyJsonPatch(node, ops).spec?.taints).toEqual([DEFAULT_TAINT, CILIUM]);
    expect(open(node).spec?.taints).toEqual([CILIUM]);
  });

  it('is neither added nor removed when turned off', () => {
    const off = testConfig({ nodeManagement: { failedTaint: { enabled: false } } });
    const node = aNode().withTaints(DEFAULT_TAINT).build();
    expect(applyJsonPatch(node, nodePatch({ node, config: off, state: failedState, open: false })).spec?.taints).toEqual([DEFAULT_TAINT]);
  });
});

describe('nodePatch: a copy without (all of) our progress', () => {
  const verifying: VerificationState = { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Verifying };
  const absent = (key: string) => ({ op: 'test', path: `/metadata/annotations/${escapePointer(key)}`, value: null });

  it('tests that our keys are still absent: a stale copy cannot overwrite progress written since', () => {
    const stale = aNode().tainted().annotate('volumes.kubernetes.io/controller-managed-attach-detach', 'true').build();
    const ops = nodePatch({ node: stale, config, state: verifying, open: false });
    expect(ops).toContainEqual(absent('kube-node-ready.io/attempt'));
    expect(ops).toContainEqual(absent('kube-node-ready.io/node-uid'));
    // The live node has moved on: another leader (or our own write the cache has not seen) recorded attempt 2.
    const live = structuredClone(stale);
    live.metadata!.annotations = { ...live.metadata!.annotations, 'kube-node-ready.io/node-uid': 'uid-node-1', 'kube-node-ready.io/attempt': '2' };
    expect(() => applyJsonPatch(live, ops)).toThrow(/attempt|node-uid/);
    // Others' annotations, labels, taints and status do not matter; against such a node it applies.
    const busy = structuredClone(stale);
    busy.metadata!.resourceVersion = '130';
    busy.metadata!.annotations!['flannel.alpha.coreos.com/public-ip'] = '10.0.0.7';
    busy.metadata!.labels = { 'topology.kubernetes.io/zone': 'a' };
    busy.status!.conditions = [{ type: 'Ready', status: 'True' }];
    const after = applyJsonPatch(busy, ops);
    expect(readState(after)).toEqual({ kind: 'ok', state: verifying });
    expect(after.metadata?.annotations).toMatchObject({ 'flannel.alpha.coreos.com/public-ip': '10.0.0.7', 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' });
  });

  it('tests every key it relies on, present or absent: progress a copy lacks but the node has refuses the write', () => {
    const read = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    const ops = nodePatch({ node: read, config, state: passed, open: true });
    expect(ops).toContainEqual({ op: 'test', path: '/metadata/annotations/kube-node-ready.io~1attempt', value: '1' });
    expect(ops).toContainEqual(absent('kube-node-ready.io/next-attempt-at'));
    const live = structuredClone(read);
    live.metadata!.annotations!['kube-node-ready.io/next-attempt-at'] = '2025-01-01T00:00:20Z';
    expect(() => applyJsonPatch(live, ops)).toThrow(/next-attempt-at/);
  });

  it('without an annotations map, tests that there is still none (creating it would replace one made meanwhile)', () => {
    const bare = aNode().tainted().build();
    delete bare.metadata!.annotations;
    const ops = nodePatch({ node: bare, config, state: verifying, open: false });
    expect(ops).toContainEqual({ op: 'test', path: '/metadata/annotations', value: null });
    const live = structuredClone(bare);
    live.metadata!.annotations = { other: 'keep' };
    expect(() => applyJsonPatch(live, ops)).toThrow(PatchTestFailed);
    expect(readState(applyJsonPatch(bare, ops))).toEqual({ kind: 'ok', state: verifying });
  });

  it('without a labels map, opening tests that there is still none (labels added meanwhile would be replaced)', () => {
    const node = aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();
    delete node.metadata!.labels;
    const ops = nodePatch({ node, config, state: passed, open: true });
    expect(ops).toContainEqual({ op: 'add', path: '/metadata/labels', value: { 'node-ready/verified': 'true' } });
    const live = structuredClone(node);
    live.metadata!.labels = { 'topology.kubernetes.io/zone': 'a' };
    expect(() => applyJsonPatch(live, ops)).toThrow(PatchTestFailed);
    expect(applyJsonPatch(node, ops).metadata?.labels).toEqual({ 'node-ready/verified': 'true' });
  });

  it('never tests the resourceVersion: kubelet status updates are no conflict', () => {
    for (const node of [aNode().tainted().build(), aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build()]) {
      const ops = nodePatch({ node, config, state: passed, open: true });
      expect(ops.some((o) => o.path === '/metadata/resourceVersion')).toBe(false);
      const live = structuredClone(node);
      live.metadata!.resourceVersion = '999';
      expect(() => applyJsonPatch(live, ops)).not.toThrow();
    }
  });
});

describe('conditionPatch', () => {
  const wanted = { type: 'kube-node-ready.io/NetworkVerified', status: 'False' as const, reason: 'ChecksFailed', message: 'dns: timeout' };

  it('sets the condition with a transition time of now when it is new', () => {
    expect(conditionPatch(aNode().build(), wanted, T0)).toEqual({
      status: { conditions: [{ ...wanted, lastHeartbeatTime: '2025-01-01T00:00:00.000Z', lastTransitionTime: '2025-01-01T00:00:00.000Z' }] },
    });
  });

  it('keeps the transition time when only the reason or message changes', () => {
    const node = aNode().build();
    node.status!.conditions = [{ ...wanted, message: 'older', lastTransitionTime: new Date(T0 - 60_000) }];
    expect(conditionPatch(node, wanted, T0)?.status.conditions[0]?.lastTransitionTime).toBe('2024-12-31T23:59:00.000Z');
  });

  it('moves the transition time when the status changes', () => {
    const node = aNode().build();
    node.status!.conditions = [{ ...wanted, status: 'Unknown', lastTransitionTime: new Date(T0 - 60_000) }];
    expect(conditionPatch(node, wanted, T0)?.status.conditions[0]?.lastTransitionTime).toBe('2025-01-01T00:00:00.000Z');
  });

  it('writes nothing when the node already says exactly this', () => {
    const node = aNode().build();
    node.status!.conditions = [{ ...wanted, lastTransitionTime: new Date(T0) }];
    expect(conditionPatch(node, wanted, T0 + 5_000)).toBeUndefined();
  });
});
