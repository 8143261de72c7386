import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { aNode, DEFAULT_TAINT, testConfig } from '../../../testing/builders.js';
import { applyJsonPatch, PatchTestFailed } from '../../../testing/json-patch.js';
import { conditionPatch, escapePointer, nodePatch, taintsToRemove } from './node-patch.js';
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

  it('adds the verified label, creating the labels map a node may not have, and writes no progress to the node', () => {
    const node = aNode().tainted().build();
    delete node.metadata?.labels;
    delete node.metadata?.annotations;
    const after = open(node);
    expect(after.metadata?.labels).toEqual({ 'node-ready/verified': 'true' });
    expect(after.metadata?.annotations).toBeUndefined();
    expect(after.spec?.taints).toEqual([]);
  });

  it('is refused when the taint list changed since the node was read (never removes by a stale index)', () => {
    const read = aNode().withTaints(CILIUM, DEFAULT_TAINT).build();
    const ops = nodePatch({ node: read, config, state: passed, open: true });
    // Meanwhile the CNI agent removed its taint: our taint moved from index 1 to 0.
    const live = aNode().withTaints(DEFAULT_TAINT).build();
    expect(() => applyJsonPatch(live, ops)).toThrow(PatchTestFailed);
  });

  it('is refused when the node was re-created under the same name', () => {
    const read = aNode().tainted().build();
    const ops = nodePatch({ node: read, config, state: passed, open: true });
    expect(() => applyJsonPatch(aNode().uid('other').tainted().build(), ops)).toThrow(/uid/);
  });

  it('is not disturbed by changes to fields it does not own', () => {
    const read = aNode().withTaints(DEFAULT_TAINT, CILIUM).build();
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

describe('nodePatch: helpers', () => {
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

describe('nodePatch: guards', () => {
  const verifying: VerificationState = { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Verifying };

  it('has nothing to change for progress alone: only tests, which the store does not send', () => {
    const ops = nodePatch({ node: aNode().tainted().build(), config, state: verifying, open: false });
    expect(ops.every((o) => o.op === 'test')).toBe(true);
  });

  it('without a labels map, opening tests that there is still none (labels added meanwhile would be replaced)', () => {
    const node = aNode().tainted().build();
    delete node.metadata!.labels;
    const ops = nodePatch({ node, config, state: passed, open: true });
    expect(ops).toContainEqual({ op: 'add', path: '/metadata/labels', value: { 'node-ready/verified': 'true' } });
    const live = structuredClone(node);
    live.metadata!.labels = { 'topology.kubernetes.io/zone': 'a' };
    expect(() => applyJsonPatch(live, ops)).toThrow(PatchTestFailed);
    expect(applyJsonPatch(node, ops).metadata?.labels).toEqual({ 'node-ready/verified': 'true' });
  });

  it('never tests the resourceVersion: kubelet status updates are no conflict', () => {
    const node = aNode().tainted().build();
    const ops = nodePatch({ node, config, state: passed, open: true });
    expect(ops.some((o) => o.path === '/metadata/resourceVersion')).toBe(false);
    const live = structuredClone(node);
    live.metadata!.resourceVersion = '999';
    expect(() => applyJsonPatch(live, ops)).not.toThrow();
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

describe('nodePatch: a startup timeout (nodeManagement.onStartupTimeout)', () => {
  const timedOut: VerificationState = { uid: 'uid-node-1', attempt: 0, failures: 0, phase: Phase.Failed, lastOutcome: Outcome.StartupTimeout, failedAt: T0 };
  it('open: removes our taints only; no verified label, no failed taint, before or after the status is stored', () => {
    const cfg = testConfig({ nodeManagement: { startupTimeout: '10m', onStartupTimeout: 'open' } });
    const node = aNode().withTaints(CILIUM, DEFAULT_TAINT).label('team', 'a').build();
    const opened = applyJsonPatch(node, nodePatch({ node, config: cfg, state: timedOut, open: true }));
    expect(opened.spec?.taints).toEqual([CILIUM]);
    expect(opened.metadata?.labels).toEqual({ team: 'a' });
    // The store's write of the Failed state that follows adds nothing.
    expect(nodePatch({ node: opened, config: cfg, state: timedOut, open: false }).filter((op) => op.op !== 'test')).toEqual([]);
  });

  it('keep and replace: the node stays closed and gets the failed taint, as any failed node', () => {
    for (const onStartupTimeout of ['keep', 'replace'] as const) {
      const cfg = testConfig({ nodeManagement: { startupTimeout: '10m', onStartupTimeout, deleteFailedNodes: true } });
      const node = aNode().withTaints(DEFAULT_TAINT).build();
      const after = applyJsonPatch(node, nodePatch({ node, config: cfg, state: timedOut, open: false }));
      expect(after.spec?.taints?.map((t) => t.key), onStartupTimeout).toEqual([DEFAULT_TAINT.key, cfg.nodeManagement.failedTaint.key]);
    }
  });
});
