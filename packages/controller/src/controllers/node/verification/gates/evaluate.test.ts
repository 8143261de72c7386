import type { V1DaemonSet, V1Node, V1Pod, V1PodSpec, V1Taint } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseGatesConfig, type GatesConfigInput } from './config.js';
import { evaluateGates, gatedAllocatable, type GateInputs } from './evaluate.js';

const OURS: V1Taint = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
const TOLERATES_OURS: Partial<V1PodSpec> = { tolerations: [{ operator: 'Exists' }] };

function aNode(opts: { taints?: V1Taint[]; labels?: Record<string, string>; allocatable?: Record<string, string> } = {}): V1Node {
  return { metadata: { name: 'n1', labels: opts.labels ?? {} }, spec: { taints: opts.taints ?? [OURS] }, ...(opts.allocatable ? { status: { allocatable: opts.allocatable } } : {}) };
}

function aDaemonSet(name: string, spec: Partial<V1PodSpec> = TOLERATES_OURS, labels: Record<string, string> = {}, namespace = 'kube-system'): V1DaemonSet {
  return { metadata: { name, namespace, uid: `uid-${name}`, labels }, spec: { selector: { matchLabels: { app: name } }, template: { spec: { containers: [], ...spec } } } };
}

function aPod(ds: V1DaemonSet, opts: { ready?: boolean; node?: string; deleting?: boolean; phase?: string } = {}): V1Pod {
  return {
    metadata: { name: `${ds.metadata?.name}-x1`, namespace: ds.metadata?.namespace ?? '', ...(opts.deleting ? { deletionTimestamp: new Date(0) } : {}) },
    spec: { containers: [], nodeName: opts.node ?? 'n1' },
    status: { phase: opts.phase ?? 'Running', conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True', ...(opts.ready === false ? { reason: 'ContainersNotReady' } : {}) }] },
  };
}

/** GateInputs from plain lists: DaemonSets by namespace (a namespace absent: not listed), pods by DaemonSet name (absent: not listed), drivers by node. */
function inputs(opts: { daemonSets?: Record<string, V1DaemonSet[]>; pods?: Record<string, V1Pod[]>; csi?: Record<string, string[]> } = {}): GateInputs {
  return {
    daemonSets: (ns) => opts.daemonSets?.[ns],
    daemonSetPods: (ds, node) => opts.pods?.[ds.metadata?.name ?? '']?.filter((p) => p.spec?.nodeName === node),
    csiDrivers: (node) => opts.csi?.[node],
  };
}

const evaluate = (gates: GatesConfigInput, node: V1Node, from: GateInputs) => evaluateGates(node, parseGatesConfig(gates), from, [OURS]);

describe('evaluateGates: DaemonSets', () => {
  const awsNode = aDaemonSet('aws-node');
  const named: GatesConfigInput = { requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }] };

  it.each<[string, GatesConfigInput, V1Node, GateInputs, string[]]>([
    ['a Ready pod on the node: holds', named, aNode(), inputs({ daemonSets: { 'kube-system': [awsNode] }, pods: { 'aws-node': [aPod(awsNode)] } }), []],
    ['no pod on the node', named, aNode(), inputs({ daemonSets: { 'kube-system': [awsNode] }, pods: { 'aws-node': [] } }), ['DaemonSet kube-system/aws-node: no pod on the node yet']],
    ['a Ready pod on another node only', named, aNode(), inputs({ daemonSets: { 'kube-system': [awsNode] }, pods: { 'aws-node': [aPod(awsNode, { node: 'n2' })] } }), ['DaemonSet kube-system/aws-node: no pod on the node yet']],
    [
      'its pod not Ready',
      named,
      aNode(),
      inputs({ daemonSets: { 'kube-system': [awsNode] }, pods: { 'aws-node': [aPod(awsNode, { ready: false })] } }),
      ['DaemonSet kube-system/aws-node: pod aws-node-x1 not Ready (Running, ContainersNotReady)'],
    ],
    ['its Ready pod being deleted does not count', named, aNode(), inputs({ daemonSets: { 'kube-system': [awsNode] }, pods: { 'aws-node': [aPod(awsNode, { deleting: true })] } }), ['DaemonSet kube-system/aws-node: no pod on the node yet']],
    ['a named DaemonSet that does not exist is waited for', named, aNode(), inputs({ daemonSets: { 'kube-system': [] } }), ['DaemonSet kube-system/aws-node: not found']],
    ['DaemonSets not listed yet', named, aNode(), inputs(), ['DaemonSets in kube-system: not listed yet']],
    ['its pods not listed yet', named, aNode(), inputs({ daemonSets: { 'kube-system': [awsNode] } }), ['DaemonSet kube-system/aws-node: its pods not listed yet']],
    [
      'a selector: each matching DaemonSet',
      { requireDaemonSets: [{ namespace: 'kube-system', selector: { matchLabels: { tier: 'node' } } }] },
      aNode(),
      inputs({
        daemonSets: { 'kube-system': [aDaemonSet('a', TOLERATES_OURS, { tier: 'node' }), aDaemonSet('b', TOLERATES_OURS, { tier: 'node' }), aDaemonSet('c', TOLERATES_OURS, { tier: 'app' })] },
        pods: { a: [aPod(aDaemonSet('a'))], b: [], c: [] },
      }),
      ['DaemonSet kube-system/b: no pod on the node yet'],
    ],
    ['a selector that matches no DaemonSet: nothing to wait for', { requireDaemonSets: [{ namespace: 'kube-system', selector: { matchLabels: { tier: 'none' } } }] }, aNode(), inputs({ daemonSets: { 'kube-system': [awsNode] } }), []],
    [
      'a DaemonSet named and selected is waited for once',
      { requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }, { namespace: 'kube-system', selector: {} }] },
      aNode(),
      inputs({ daemonSets: { 'kube-system': [awsNode] }, pods: { 'aws-node': [] } }),
      ['DaemonSet kube-system/aws-node: no pod on the node yet'],
    ],
    ['one that does not select the node is not waited for', named, aNode(), inputs({ daemonSets: { 'kube-system': [aDaemonSet('aws-node', { ...TOLERATES_OURS, nodeSelector: { pool: 'other' } })] }, pods: { 'aws-node': [] } }), []],
    ['one that does not tolerate the verification taint is not waited for', named, aNode(), inputs({ daemonSets: { 'kube-system': [aDaemonSet('aws-node', {})] }, pods: { 'aws-node': [] } }), []],
    [
      'one that tolerates the verification taint but not a CNI\'s startup taint is not waited for while that taint is there',
      named,
      aNode({ taints: [OURS, { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' }] }),
      inputs({ daemonSets: { 'kube-system': [aDaemonSet('aws-node', { tolerations: [{ key: OURS.key, operator: 'Exists' }] })] }, pods: { 'aws-node': [] } }),
      [],
    ],
    [
      '... and is once that taint is gone',
      named,
      aNode({ taints: [OURS] }),
      inputs({ daemonSets: { 'kube-system': [aDaemonSet('aws-node', { tolerations: [{ key: OURS.key, operator: 'Exists' }] })] }, pods: { 'aws-node': [] } }),
      ['DaemonSet kube-system/aws-node: no pod on the node yet'],
    ],
  ])('%s', (_name, gates, node, from, waitingFor) => {
    const verdict = evaluate(gates, node, from);
    expect(verdict.waitingFor).toEqual(waitingFor);
    expect(verdict.held).toBe(waitingFor.length === 0);
  });

  it('says why a required DaemonSet is not awaited: the verification taint (it could only run once the node is open), another taint, or not selecting the node', () => {
    const gates: GatesConfigInput = {
      requireDaemonSets: [
        { namespace: 'kube-system', name: 'needs-open' },
        { namespace: 'kube-system', name: 'elsewhere' },
        { namespace: 'kube-system', name: 'no-cilium' },
        { namespace: 'kube-system', selector: { matchLabels: { tier: 'gpu' } } },
      ],
    };
    const cilium: V1Taint = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
    const verdict = evaluate(
      gates,
      aNode({ taints: [OURS, cilium] }),
      inputs({
        daemonSets: {
          'kube-system': [
            aDaemonSet('needs-open', { tolerations: [{ key: cilium.key, operator: 'Exists' }] }),
            aDaemonSet('elsewhere', { ...TOLERATES_OURS, nodeSelector: { pool: 'other' } }),
            aDaemonSet('no-cilium', { tolerations: [{ key: OURS.key, operator: 'Exists' }] }),
            // Selected by a selector only, and not for this node: not worth a line.
            aDaemonSet('gpu-plugin', { ...TOLERATES_OURS, nodeSelector: { pool: 'gpu' } }, { tier: 'gpu' }),
          ],
        },
        pods: {},
      }),
    );
    expect(verdict).toEqual({
      held: true,
      waitingFor: [],
      notAwaited: [
        'DaemonSet kube-system/needs-open: not awaited: it does not tolerate the verification taint node-ready/unverified=true:NoSchedule, so it can only run once the node is open',
        'DaemonSet kube-system/elsewhere: not awaited: it does not select this node (nodeName, nodeSelector or node affinity)',
        'DaemonSet kube-system/no-cilium: not awaited: it does not tolerate the node\'s taint node.cilium.io/agent-not-ready=true:NoSchedule',
      ],
    });
  });
});

describe('evaluateGates: CSI drivers and allocatable resources', () => {
  it.each<[string, GatesConfigInput, V1Node, GateInputs, string[]]>([
    ['the driver registered', { requireCSIDrivers: ['ebs.csi.aws.com'] }, aNode(), inputs({ csi: { n1: ['efs.csi.aws.com', 'ebs.csi.aws.com'] } }), []],
    ['the driver not registered', { requireCSIDrivers: ['ebs.csi.aws.com'] }, aNode(), inputs({ csi: { n1: ['efs.csi.aws.com'] } }), ['CSI driver ebs.csi.aws.com not registered in CSINode']],
    ['no CSINode', { requireCSIDrivers: ['ebs.csi.aws.com'] }, aNode(), inputs({ csi: { n2: ['ebs.csi.aws.com'] } }), ['CSI driver ebs.csi.aws.com not registered (the node has no CSINode yet)']],
    ['enough of the resource', { requireResources: { 'nvidia.com/gpu': 1 } }, aNode({ allocatable: { 'nvidia.com/gpu': '4' } }), inputs(), []],
    ['none of it', { requireResources: { 'nvidia.com/gpu': 1 } }, aNode({ allocatable: { cpu: '4' } }), inputs(), ['allocatable nvidia.com/gpu: none, need 1']],
    ['zero of it', { requireResources: { 'nvidia.com/gpu': 1 } }, aNode({ allocatable: { 'nvidia.com/gpu': '0' } }), inputs(), ['allocatable nvidia.com/gpu: 0, need 1']],
    ['quantities compare as quantities, not strings', { requireResources: { 'hugepages-2Mi': '1Gi' } }, aNode({ allocatable: { 'hugepages-2Mi': '512Mi' } }), inputs(), ['allocatable hugepages-2Mi: 512Mi, need 1Gi']],
    ['1.5Gi is 1536Mi', { requireResources: { 'example.com/mem': '1536Mi' } }, aNode({ allocatable: { 'example.com/mem': '1.5Gi' } }), inputs(), []],
    ['no status at all', { requireResources: { 'nvidia.com/gpu': 1 } }, aNode(), inputs(), ['allocatable nvidia.com/gpu: none, need 1']],
  ])('%s', (_name, gates, node, from, waitingFor) => {
    expect(evaluate(gates, node, from)).toEqual({ held: waitingFor.length === 0, waitingFor, notAwaited: [] });
  });

  it('no gate: held, whatever the inputs', () => {
    expect(evaluate({}, aNode(), inputs())).toEqual({ held: true, waitingFor: [], notAwaited: [] });
  });

  it('gatedAllocatable keeps the required resources the node has, for the node cache and its fingerprint', () => {
    expect(gatedAllocatable(aNode({ allocatable: { cpu: '4', 'nvidia.com/gpu': '1', pods: '110' } }), ['nvidia.com/gpu', 'example.com/fpga'])).toEqual({ 'nvidia.com/gpu': '1' });
  });
});
