import type { V1DaemonSet, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { selectorString, slimDaemonSet, slimGatePod } from './sources.js';

describe('selectorString (a DaemonSet\'s .spec.selector as a watch\'s labelSelector)', () => {
  it.each<[string, Parameters<typeof selectorString>[0], string]>([
    ['matchLabels', { matchLabels: { 'k8s-app': 'aws-node', tier: 'node' } }, 'k8s-app=aws-node,tier=node'],
    [
      'each operator',
      { matchExpressions: [{ key: 'a', operator: 'In', values: ['x', 'y'] }, { key: 'b', operator: 'NotIn', values: ['z'] }, { key: 'c', operator: 'Exists' }, { key: 'd', operator: 'DoesNotExist' }] },
      'a in (x,y),b notin (z),c,!d',
    ],
    ['none', undefined, ''],
  ])('%s', (_name, selector, expected) => {
    expect(selectorString(selector)).toBe(expected);
  });
});

describe('what the gate caches keep', () => {
  it('a DaemonSet: what decides where it runs, not its status or the rest of its template', () => {
    const ds: V1DaemonSet = {
      metadata: { name: 'aws-node', namespace: 'kube-system', uid: 'u1', resourceVersion: '7', labels: { a: 'b' }, annotations: { big: 'x'.repeat(1000) }, managedFields: [{}] },
      spec: {
        selector: { matchLabels: { 'k8s-app': 'aws-node' } },
        template: {
          metadata: { labels: { 'k8s-app': 'aws-node' } },
          spec: {
            containers: [{ name: 'aws-node', image: 'x', env: [{ name: 'A', value: 'B' }] }],
            hostNetwork: true,
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            tolerations: [{ operator: 'Exists' }],
            affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'Exists' }] }] } }, podAntiAffinity: {} },
          },
        },
      },
      status: { currentNumberScheduled: 3, desiredNumberScheduled: 3, numberMisscheduled: 0, numberReady: 3 },
    };
    expect(slimDaemonSet(ds)).toEqual({
      metadata: { name: 'aws-node', namespace: 'kube-system', uid: 'u1', resourceVersion: '7', labels: { a: 'b' } },
      spec: {
        selector: { matchLabels: { 'k8s-app': 'aws-node' } },
        template: {
          spec: {
            containers: [],
            hostNetwork: true,
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            tolerations: [{ operator: 'Exists' }],
            affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'Exists' }] }] } } },
          },
        },
      },
    });
  });

  it('a pod: its node, controller, deletion, phase and Ready condition', () => {
    const pod: V1Pod = {
      metadata: {
        name: 'aws-node-x',
        namespace: 'kube-system',
        uid: 'p1',
        resourceVersion: '9',
        labels: { 'k8s-app': 'aws-node' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'aws-node', uid: 'u1', controller: true }, { apiVersion: 'v1', kind: 'Other', name: 'o', uid: 'o1' }],
      },
      spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'x' }] },
      status: { phase: 'Running', podIP: '10.0.0.1', conditions: [{ type: 'PodScheduled', status: 'True' }, { type: 'Ready', status: 'True', lastTransitionTime: new Date(0) }], containerStatuses: [] },
    };
    expect(slimGatePod(pod)).toEqual({
      metadata: { name: 'aws-node-x', namespace: 'kube-system', uid: 'p1', resourceVersion: '9', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'aws-node', uid: 'u1', controller: true }] },
      spec: { containers: [], nodeName: 'n1' },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    });
  });
});
