import type { V1Taint, V1Toleration } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { formatTaint, tolerates, untoleratedTaints } from './taints.js';

const cilium: V1Taint = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };

describe('tolerates (the scheduler\'s matching rules)', () => {
  it.each<[string, V1Toleration, V1Taint, boolean]>([
    ['Exists on the key, any value', { key: cilium.key, operator: 'Exists' }, cilium, true],
    ['Exists with the same effect', { key: cilium.key, operator: 'Exists', effect: 'NoSchedule' }, cilium, true],
    ['Exists with another effect', { key: cilium.key, operator: 'Exists', effect: 'NoExecute' }, cilium, false],
    ['Exists on another key', { key: 'other', operator: 'Exists' }, cilium, false],
    ['empty key with Exists tolerates everything', { operator: 'Exists' }, cilium, true],
    ['Equal with the same value', { key: cilium.key, operator: 'Equal', value: 'true' }, cilium, true],
    ['Equal is the default operator', { key: cilium.key, value: 'true' }, cilium, true],
    ['Equal with another value', { key: cilium.key, operator: 'Equal', value: 'false' }, cilium, false],
    ['Equal without a value, taint without a value', { key: 'gpu', operator: 'Equal' }, { key: 'gpu', effect: 'NoSchedule' }, true],
    ['Equal with an empty key matches nothing', { operator: 'Equal', value: 'true' }, cilium, false],
    ['an unknown operator matches nothing', { key: cilium.key, operator: 'Lt', value: '1' }, cilium, false],
  ])('%s', (_name, toleration, taint, expected) => {
    expect(tolerates(toleration, taint)).toBe(expected);
  });
});

describe('untoleratedTaints', () => {
  const taints: V1Taint[] = [
    { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' },
    cilium,
    { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' },
    { key: 'example.com/drain', value: 'soon', effect: 'NoExecute' },
    { key: 'example.com/prefer-not', effect: 'PreferNoSchedule' },
  ];

  it('names the NoSchedule and NoExecute taints no toleration matches, in the node\'s order; PreferNoSchedule never blocks', () => {
    const tolerations: V1Toleration[] = [{ key: 'node-ready/unverified', operator: 'Exists', effect: 'NoSchedule' }];
    expect(untoleratedTaints(taints, tolerations).map(formatTaint)).toEqual([
      'node.cilium.io/agent-not-ready=true:NoSchedule',
      'node.kubernetes.io/unschedulable:NoSchedule',
      'example.com/drain=soon:NoExecute',
    ]);
  });

  it('is empty when everything is tolerated', () => {
    expect(untoleratedTaints(taints, [{ operator: 'Exists' }])).toEqual([]);
    expect(untoleratedTaints([], [])).toEqual([]);
  });
});
