// The bench's observer stamps "launchable" by its own copy of the controller's rule (it runs as a
// separate process without the controller's configuration): hold the copy to the original.
import { describe, expect, it } from 'vitest';
import { launchBlockers } from '../../packages/controller/src/controllers/node/verification/decide.js';
import { aNode, DEFAULT_TAINT, testConfig } from '../../packages/controller/src/testing/builders.js';
import { launchable } from '../../bench/src/observer.js';

const config = testConfig();
const cases = [
  ['Ready, only our taint', aNode().tainted()],
  ['not Ready', aNode().tainted().notReady()],
  ['Ready Unknown', aNode().tainted().notReady('NodeStatusUnknown', 'Kubelet stopped posting node status.', 'Unknown')],
  ['no Ready condition yet', aNode().tainted().withoutReady()],
  ['a CNI agent taint', aNode().withTaints(DEFAULT_TAINT, { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' })],
  ['Karpenter unregistered', aNode().withTaints(DEFAULT_TAINT, { key: 'karpenter.sh/unregistered', effect: 'NoExecute' })],
  ['cloud provider uninitialized', aNode().withTaints(DEFAULT_TAINT, { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' })],
  ['not-ready taint left on a Ready node', aNode().withTaints(DEFAULT_TAINT, { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' })],
  ['unreachable taint', aNode().withTaints(DEFAULT_TAINT, { key: 'node.kubernetes.io/unreachable', effect: 'NoSchedule' })],
  ['a PreferNoSchedule taint', aNode().withTaints(DEFAULT_TAINT, { key: 'example.com/soft', effect: 'PreferNoSchedule' })],
] as const;

describe('bench observer: launchable', () => {
  it.each(cases)('%s: as the controller decides', (_, builder) => {
    const node = builder.build();
    expect(launchable(node, DEFAULT_TAINT.key)).toBe(launchBlockers(node, config).length === 0);
  });

  it('covers both answers', () => {
    const answers = new Set(cases.map(([, b]) => launchable(b.build(), DEFAULT_TAINT.key)));
    expect(answers).toEqual(new Set([true, false]));
  });
});
