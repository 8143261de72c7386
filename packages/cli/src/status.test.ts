import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseConfig, type ControllerConfig } from '@kube-node-ready/controller';
import { nodeStatus } from './status.js';

const config = parseConfig({}) as ControllerConfig;
const NOW = Date.UTC(2025, 0, 1, 0, 1, 0);

function node(conditionReason?: string, message = ''): V1Node {
  return {
    metadata: { name: 'n1', uid: 'u1', creationTimestamp: new Date(Date.UTC(2025, 0, 1)) },
    spec: { taints: [{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }] },
    status: { conditions: conditionReason ? [{ type: config.nodeManagement.condition.type, status: 'Unknown', reason: conditionReason, message }] : [] },
  };
}

describe('kube-node-ready status: one node', () => {
  it('a tainted node the controller has not looked at yet is Pending', () => {
    expect(nodeStatus(node(), config, NOW)).toMatchObject({ state: 'Pending', attempt: 0, lastOutcome: '', ageSeconds: 60 });
  });

  it('a node waiting to be able to run the worker is Waiting, with what it waits for', () => {
    const message = 'no attempt until the node can run the worker; waiting for: Ready (NotReady: KubeletNotReady)';
    expect(nodeStatus(node('WaitingForNode', message), config, NOW)).toMatchObject({ state: 'Waiting', attempt: 0, lastOutcome: 'WaitingForNode', lastMessage: message });
    expect(nodeStatus(node('NodeNotLaunchable', 'the node cannot run the worker 10m after its creation'), config, NOW)).toMatchObject({ state: 'Waiting', lastOutcome: 'NodeNotLaunchable' });
  });
});
