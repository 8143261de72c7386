import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ControllerConfig } from '../config/schema.js';
import { Phase } from '../controllers/node/verification/types.js';
import { aNode, testConfig, testProgress } from '../testing/builders.js';
import { agentStep } from './step.js';

const T0 = Date.UTC(2025, 0, 1);
const step = (node: V1Node, now = T0, config: ControllerConfig = testConfig()) => agentStep(node, testProgress.read(node), now, config);

describe('agentStep: the DaemonSet agent on its own node', () => {
  it('starts attempt 1 on a tainted, Ready node without progress', () => {
    expect(step(aNode().tainted().build())).toEqual({ kind: 'Attempt', state: { uid: 'uid-node-1', attempt: 1, failures: 0, phase: Phase.Verifying } });
  });

  it('is idle on a verified, deleting or untainted node', () => {
    expect(step(aNode().tainted().verified().build())).toEqual({ kind: 'Idle', reason: 'Verified' });
    expect(step(aNode().tainted().deleting().build())).toEqual({ kind: 'Idle', reason: 'NodeDeleting' });
    expect(step(aNode().build())).toEqual({ kind: 'Idle', reason: 'NotCandidate' });
    expect(step(aNode().build(), T0, testConfig({ nodeManagement: { verifyUntaintedNodes: true } })).kind).toBe('Attempt');
  });

  it('continues the count after failures, and waits out the backoff first', () => {
    const node = aNode().tainted().withCondition('False').withState({ attempt: 2, failures: 2, phase: Phase.Backoff, nextAttemptAt: T0 + 5000 }).build();
    expect(step(node)).toEqual({ kind: 'Wait', reason: 'Backoff', untilMs: T0 + 5000 });
    expect(step(node, T0 + 5000)).toMatchObject({ kind: 'Attempt', state: { attempt: 3, failures: 2, phase: Phase.Verifying } });
  });

  it('an attempt left Verifying (the pod restarted) is not counted: a new number, the same failures', () => {
    const node = aNode().tainted().withCondition('Unknown').withState({ attempt: 3, failures: 1, phase: Phase.Verifying }).build();
    expect(step(node)).toMatchObject({ kind: 'Attempt', interrupted: 3, state: { attempt: 4, failures: 1, phase: Phase.Verifying } });
  });

  it('stays idle once retries are exhausted, and starts again when the progress is reset', () => {
    const failed = aNode().tainted().withCondition('False').withState({ attempt: 4, failures: 4, phase: Phase.Failed }).build();
    expect(step(failed)).toEqual({ kind: 'Idle', reason: 'Failed' });
    expect(step(aNode().tainted().withCondition('False').build())).toMatchObject({ kind: 'Attempt', state: { attempt: 1 } });
  });

  it('waits for a NotReady node without using an attempt', () => {
    expect(step(aNode().tainted().notReady().build())).toMatchObject({ kind: 'Wait', reason: 'NodeNotLaunchable', waitingFor: [expect.stringContaining('Ready (NotReady')] });
  });

  it('re-verifies a node whose verified label was removed; in dry run a pass is final', () => {
    const passed = aNode().tainted().withCondition('True').withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: T0 }).build();
    expect(step(passed)).toMatchObject({ kind: 'Attempt', state: { attempt: 2, failures: 0, verifiedAt: T0 } });
    expect(step(passed, T0, testConfig({ dryRun: true }))).toEqual({ kind: 'Idle', reason: 'Verified' });
  });
});
