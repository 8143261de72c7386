import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NodeAnnotation } from '../../../api/well-known.js';
import { aNode, testConfig, testProgress } from '../../../testing/builders.js';
import { nodeFingerprint } from './controller.js';
import { decide } from './decide.js';
import { conditionPatch, nodePatch } from './node-patch.js';
import { slimNode } from './slim-node.js';
import { Outcome, Phase } from './types.js';

const config = testConfig();
const OURS = config.nodeManagement.condition.type;
const T0 = Date.UTC(2025, 0, 1);

/** A node as a kubelet registers it and the API server returns it, plus our condition and a NodeClaim owner. */
function registered(node: V1Node): V1Node {
  const now = '2025-01-01T00:00:00Z';
  return {
    ...node,
    metadata: {
      ...node.metadata,
      ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'default-abc', uid: 'claim-uid' }],
      finalizers: ['karpenter.sh/termination'],
      managedFields: [{ manager: 'kubelet', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: {} }],
    },
    spec: { ...node.spec, podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24'], providerID: 'aws:///us-east-1a/i-0abc' },
    status: {
      conditions: [
        { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory', message: 'kubelet has sufficient memory available', lastHeartbeatTime: new Date(now), lastTransitionTime: new Date(now) },
        // The builder's Ready as a kubelet posts it (with heartbeat and transition times).
        ...(node.status?.conditions ?? []).map((c) => (c.type === 'Ready' ? { ...c, lastHeartbeatTime: new Date(now), lastTransitionTime: new Date(now) } : c)),
      ],
      addresses: [{ type: 'InternalIP', address: '10.1.2.3' }],
      capacity: { cpu: '4', memory: '16Gi', pods: '110' },
      allocatable: { cpu: '3920m', memory: '15Gi', pods: '110' },
      nodeInfo: { architecture: 'amd64', bootID: 'b', containerRuntimeVersion: 'containerd://2.1.0', kernelVersion: '6.1', kubeProxyVersion: '', kubeletVersion: 'v1.36.3', machineID: 'm', operatingSystem: 'linux', osImage: 'Bottlerocket', systemUUID: 's' },
      images: [{ names: ['registry.k8s.io/pause:3.10'], sizeBytes: 320_000 }],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
    },
  };
}

const ourCondition = { type: OURS, status: 'Unknown', reason: 'Verifying', message: 'attempt 1 of 6 in progress', lastHeartbeatTime: new Date(T0), lastTransitionTime: new Date(T0) };

describe('slimNode', () => {
  it('keeps what the controller reads, and only that', () => {
    const full = registered(
      aNode('n1').tainted().label('karpenter.sh/nodepool', 'default').annotate('other/x', '1').annotate(NodeAnnotation.RemediationOptOut, 'disabled').annotate(NodeAnnotation.KarpenterDoNotDisrupt, 'true').build(),
    );
    full.status?.conditions?.push(ourCondition);
    full.metadata!.deletionTimestamp = new Date(T0);
    expect(slimNode(full, OURS)).toEqual({
      metadata: {
        name: 'n1',
        uid: 'uid-n1',
        resourceVersion: '100',
        creationTimestamp: full.metadata?.creationTimestamp,
        deletionTimestamp: new Date(T0),
        labels: { 'karpenter.sh/nodepool': 'default' },
        // Only those the controller reads.
        annotations: { [NodeAnnotation.RemediationOptOut]: 'disabled', [NodeAnnotation.KarpenterDoNotDisrupt]: 'true' },
        ownerReferences: full.metadata?.ownerReferences,
      },
      spec: { taints: full.spec?.taints, providerID: 'aws:///us-east-1a/i-0abc' },
      // Ready without its heartbeat (decide() launches only on a Ready node), and ours.
      status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastTransitionTime: new Date(T0) }, ourCondition] },
    });
  });

  it('leaves absent maps absent (the write guard tests an absent map differently from an empty one)', () => {
    const bare: V1Node = { metadata: { name: 'n2', uid: 'u2', resourceVersion: '7' } };
    expect(slimNode(bare, OURS)).toEqual({ metadata: { name: 'n2', uid: 'u2', resourceVersion: '7' } });
    expect(slimNode(bare, OURS).metadata).not.toHaveProperty('labels');
  });

  // Every decision the controller takes from a cached node is the same for the slim copy.
  const states: Array<[string, V1Node]> = [
    ['new and tainted', aNode().tainted().build()],
    ['verifying', aNode().tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build()],
    ['backoff', aNode().tainted().withState({ attempt: 2, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0 + 60_000, lastOutcome: Outcome.ChecksFailed, lastMessage: 'dns: SERVFAIL' }).build()],
    ['failed', aNode().tainted().withState({ attempt: 6, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.NotStarted }).build()],
    ['passed and open', aNode().verified().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: T0 }).build()],
    ['karpenter, not registered', aNode().tainted().inNodePool('default').withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build()],
    ['deleting', aNode().tainted().deleting().build()],
    ['not ready', aNode().tainted().notReady().build()],
    ['no labels or annotations', { metadata: { name: 'n3', uid: 'u3', resourceVersion: '9' }, spec: { taints: [{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }] } }],
  ];
  it.each(states)('%s: same decision, fingerprint, node patch and condition patch', (_, node) => {
    const full = registered(node);
    full.status?.conditions?.push(ourCondition);
    const slim = slimNode(structuredClone(full), OURS);
    const read = testProgress.read(full);
    const state = read.kind === 'ok' ? read.state : undefined;
    expect(decide(slim, [], T0 + 30_000, config, { state, slotsTaken: 0 })).toEqual(decide(full, [], T0 + 30_000, config, { state, slotsTaken: 0 }));
    expect(nodeFingerprint(slim, { name: 'default', config })).toBe(nodeFingerprint(full, { name: 'default', config }));
    const next = { uid: full.metadata?.uid ?? '', attempt: 2, failures: 0, phase: Phase.Passed, verifiedAt: T0 };
    expect(nodePatch({ node: slim, config, state: next, open: true })).toEqual(nodePatch({ node: full, config, state: next, open: true }));
    const wanted = { type: OURS, status: 'True' as const, reason: 'Passed', message: 'all checks passed' };
    expect(conditionPatch(slim, wanted, T0)).toEqual(conditionPatch(full, wanted, T0));
  });
});

describe('slimNode with a resource gate', () => {
  const gated = testConfig({ gates: { requireResources: { 'nvidia.com/gpu': 1 } } });
  const profile = { name: 'default', config: gated };
  const withGpus = (count?: string): V1Node => {
    const node = registered(aNode().tainted().build());
    node.status = { ...node.status, allocatable: { cpu: '8', memory: '32Gi', ...(count ? { 'nvidia.com/gpu': count } : {}) } };
    return node;
  };

  it('keeps only the gated resources of allocatable, and nothing of it without a gate', () => {
    expect(slimNode(withGpus('4'), OURS, new Set(['nvidia.com/gpu'])).status?.allocatable).toEqual({ 'nvidia.com/gpu': '4' });
    expect(slimNode(withGpus(), OURS, new Set(['nvidia.com/gpu'])).status?.allocatable).toBeUndefined();
    expect(slimNode(withGpus('4'), OURS).status?.allocatable).toBeUndefined();
  });

  it('a gated resource appearing changes the fingerprint (the node is reconciled); other allocatable changes do not', () => {
    const before = slimNode(withGpus(), OURS, new Set(['nvidia.com/gpu']));
    const after = slimNode(withGpus('1'), OURS, new Set(['nvidia.com/gpu']));
    expect(nodeFingerprint(after, profile)).not.toBe(nodeFingerprint(before, profile));
    const cpu = withGpus('1');
    cpu.status!.allocatable!['cpu'] = '7';
    expect(nodeFingerprint(cpu, profile)).toBe(nodeFingerprint(withGpus('1'), profile));
  });
});
