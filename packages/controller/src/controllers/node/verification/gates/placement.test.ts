import type { V1DaemonSet, V1Node, V1NodeSelectorTerm, V1PodSpec, V1Taint } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { formatTaint } from '../taints.js';
import { daemonSetPlacement, matchesRequiredNodeAffinity } from './placement.js';

const node = (labels: Record<string, string> = {}, taints: V1Taint[] = [], name = 'ip-10-0-0-1'): V1Node => ({ metadata: { name, labels }, spec: { taints } });
const ds = (spec: Partial<V1PodSpec> = {}): V1DaemonSet => ({ metadata: { name: 'agent', namespace: 'kube-system' }, spec: { selector: {}, template: { spec: { containers: [], ...spec } } } });
const required = (...terms: V1NodeSelectorTerm[]): Partial<V1PodSpec> => ({ affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } } });

const GPU = { 'karpenter.sh/nodepool': 'gpu', 'example.com/generation': '5' };

describe('matchesRequiredNodeAffinity (nodeaffinity.GetRequiredNodeAffinity(pod).Match)', () => {
  it.each<[string, Partial<V1PodSpec>, Record<string, string>, boolean]>([
    ['no selector, no affinity: every node', {}, {}, true],
    ['nodeSelector: every label equal', { nodeSelector: { 'karpenter.sh/nodepool': 'gpu' } }, GPU, true],
    ['nodeSelector: another value', { nodeSelector: { 'karpenter.sh/nodepool': 'general' } }, GPU, false],
    ['nodeSelector: a missing label', { nodeSelector: { 'example.com/zone': 'a' } }, GPU, false],
    ['nodeSelector with an empty value needs the label, empty', { nodeSelector: { 'example.com/empty': '' } }, GPU, false],
    ['In', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: ['gpu', 'ml'] }] }), GPU, true],
    ['In, another value', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: ['general'] }] }), GPU, false],
    ['NotIn holds when the label is absent', required({ matchExpressions: [{ key: 'example.com/zone', operator: 'NotIn', values: ['a'] }] }), GPU, true],
    ['NotIn with the value', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'NotIn', values: ['gpu'] }] }), GPU, false],
    ['Exists', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Exists' }] }), GPU, true],
    ['DoesNotExist', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'DoesNotExist' }] }), GPU, false],
    ['Gt on an integer label', required({ matchExpressions: [{ key: 'example.com/generation', operator: 'Gt', values: ['4'] }] }), GPU, true],
    ['Gt, not above', required({ matchExpressions: [{ key: 'example.com/generation', operator: 'Gt', values: ['5'] }] }), GPU, false],
    ['Lt', required({ matchExpressions: [{ key: 'example.com/generation', operator: 'Lt', values: ['6'] }] }), GPU, true],
    ['Gt on a label that is not an integer', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Gt', values: ['1'] }] }), GPU, false],
    ['expressions of a term are ANDed', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Exists' }, { key: 'example.com/zone', operator: 'Exists' }] }), GPU, false],
    [
      'terms are ORed',
      required({ matchExpressions: [{ key: 'example.com/zone', operator: 'Exists' }] }, { matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: ['gpu'] }] }),
      GPU,
      true,
    ],
    ['matchFields metadata.name In', required({ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['ip-10-0-0-1'] }] }), GPU, true],
    ['matchFields metadata.name In another node (the DaemonSet controller pins its pods so)', required({ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['ip-10-0-0-2'] }] }), GPU, false],
    ['matchFields metadata.name NotIn', required({ matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['ip-10-0-0-2'] }] }), GPU, true],
    ['matchFields with two values does not parse: the term selects nothing', required({ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['ip-10-0-0-1', 'x'] }] }), GPU, false],
    ['an empty term selects nothing', required({}), GPU, false],
    ['no terms select nothing', required(), GPU, false],
    [
      'a term that does not parse is skipped, the next may match',
      required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: [] }] }, { matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Exists' }] }),
      GPU,
      true,
    ],
    ['Exists with values does not parse', required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Exists', values: ['gpu'] }] }), GPU, false],
    ['nodeSelector and affinity both apply', { nodeSelector: { 'karpenter.sh/nodepool': 'general' }, ...required({ matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Exists' }] }) }, GPU, false],
  ])('%s', (_name, spec, labels, expected) => {
    expect(matchesRequiredNodeAffinity(node(labels), { containers: [], ...spec })).toBe(expected);
  });
});

describe('daemonSetPlacement (the DaemonSet controller\'s NodeShouldRunDaemonPod)', () => {
  const ours: V1Taint = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
  const untolerated = (n: V1Node, d: V1DaemonSet): string[] => {
    const p = daemonSetPlacement(n, d);
    return p.runs ? [] : p.why === 'untolerated' ? p.taints.map(formatTaint) : [p.why];
  };

  it.each<[string, V1Taint[], Partial<V1PodSpec>, string[]]>([
    ['no taints: runs', [], {}, []],
    ['PreferNoSchedule never keeps it off', [{ key: 'example.com/soft', effect: 'PreferNoSchedule' }], {}, []],
    ['the verification taint, not tolerated', [ours], {}, ['node-ready/unverified=true:NoSchedule']],
    ['the verification taint, tolerated by key', [ours], { tolerations: [{ key: 'node-ready/unverified', operator: 'Exists' }] }, []],
    ['tolerates everything (a CNI agent\'s operator: Exists)', [ours, { key: 'example.com/x', effect: 'NoExecute' }], { tolerations: [{ operator: 'Exists' }] }, []],
    ['not-ready NoExecute: tolerated by every DaemonSet pod', [{ key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' }], {}, []],
    ['unreachable NoExecute: tolerated by every DaemonSet pod', [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }], {}, []],
    ['not-ready NoSchedule: not among the added tolerations', [{ key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' }], {}, ['node.kubernetes.io/not-ready:NoSchedule']],
    [
      'disk-, memory-, pid-pressure and unschedulable NoSchedule: tolerated by every DaemonSet pod',
      ['disk-pressure', 'memory-pressure', 'pid-pressure', 'unschedulable'].map((k) => ({ key: `node.kubernetes.io/${k}`, effect: 'NoSchedule' })),
      {},
      [],
    ],
    ['network-unavailable: tolerated only on the host network', [{ key: 'node.kubernetes.io/network-unavailable', effect: 'NoSchedule' }], {}, ['node.kubernetes.io/network-unavailable:NoSchedule']],
    ['network-unavailable with hostNetwork', [{ key: 'node.kubernetes.io/network-unavailable', effect: 'NoSchedule' }], { hostNetwork: true }, []],
    ['a CNI startup taint, not tolerated', [{ key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' }], {}, ['node.cilium.io/agent-not-ready=true:NoSchedule']],
    ['another node\'s name in the template', [], { nodeName: 'ip-10-0-0-2' }, ['not-selected']],
    ['its own name in the template', [], { nodeName: 'ip-10-0-0-1' }, []],
    ['not selected, whatever the taints', [ours], { nodeSelector: { 'karpenter.sh/nodepool': 'general' } }, ['not-selected']],
  ])('%s', (_name, taints, spec, expected) => {
    expect(untolerated(node(GPU, taints), ds(spec))).toEqual(expected);
  });
});
