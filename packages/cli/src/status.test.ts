import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NodeVerificationApi, parseConfig, VERIFIED_CONDITION, type ControllerConfig, type NodeVerification, type NodeVerificationStatus } from '@kube-node-ready/controller';
import { attemptsInFlight, nodeStatus, renderStatus } from './status.js';

const config = parseConfig({}) as ControllerConfig;
const CREATED = Date.UTC(2025, 0, 1);
const NOW = CREATED + 60_000;
const TAINT = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };

function node(opts: { tainted?: boolean; verified?: boolean } = {}): V1Node {
  return {
    metadata: { name: 'n1', uid: 'u1', creationTimestamp: new Date(CREATED), labels: opts.verified ? { 'node-ready/verified': 'true' } : {} },
    spec: { taints: (opts.tainted ?? true) ? [TAINT] : [] },
  };
}

/** The NodeVerification of n1 as the controller writes it: its condition (type Verified) says the same as the phase. */
function nv(status: NodeVerificationStatus, nodeUID = 'u1'): NodeVerification {
  return { apiVersion: NodeVerificationApi.apiVersion, kind: NodeVerificationApi.kind, metadata: { name: 'n1' }, spec: { nodeName: 'n1', nodeUID }, status };
}

const condition = (status: 'True' | 'False' | 'Unknown', reason: string, message: string) => [{ type: VERIFIED_CONDITION, status, reason, message, lastTransitionTime: '2025-01-01T00:00:30Z' }];
const at = (secondsAfterCreation: number) => new Date(CREATED + secondsAfterCreation * 1000).toISOString().replace('.000Z', 'Z');

describe('kube-node-ready status: one node, from its NodeVerification', () => {
  it('a tainted node without a NodeVerification (the controller has not looked at it yet) is Pending', () => {
    expect(nodeStatus(node(), undefined, config, NOW)).toMatchObject({ state: 'Pending', attempt: 0, failures: 0, lastOutcome: '', ageSeconds: 60 });
  });

  it('an attempt in flight is read from its running worker pod (it is not written): Verifying, with its number', () => {
    const pod = (attempt: number, phase: string, uid = 'u1') => ({
      metadata: { name: `knr-n1-a${attempt}`, annotations: { 'kube-node-ready.io/node-name': 'n1', 'kube-node-ready.io/node-uid': uid, 'kube-node-ready.io/attempt': String(attempt) } },
      status: { phase },
    });
    const running = attemptsInFlight([pod(1, 'Failed'), pod(2, 'Running'), pod(7, 'Pending', 'an-earlier-node')]);
    expect(running.get('n1/u1')).toBe(2);
    expect(nodeStatus(node(), undefined, config, NOW, running.get('n1/u1'))).toMatchObject({ state: 'Verifying', attempt: 2 });
    // The stored progress has it already (an older controller wrote attempts): that is what is shown.
    expect(nodeStatus(node(), nv({ phase: 'Backoff', attempt: 2, failures: 1, nextAttemptAt: at(90) }), config, NOW, 2)).toMatchObject({ state: 'Backoff', attempt: 2 });
    expect(attemptsInFlight([pod(3, 'Succeeded')]).size).toBe(0);
  });

  it('a node waiting to be able to run the worker, or for a slot, is Waiting, with what it waits for', () => {
    const message = 'no attempt until the node can run the worker; waiting for: Ready (NotReady: KubeletNotReady)';
    expect(nodeStatus(node(), nv({ phase: 'Waiting', attempt: 0, conditions: condition('Unknown', 'WaitingForNode', message) }), config, NOW)).toMatchObject({
      state: 'Waiting',
      attempt: 0,
      lastOutcome: 'WaitingForNode',
      lastMessage: message,
    });
    const overdue = nv({ phase: 'Waiting', attempt: 0, conditions: condition('False', 'NodeNotLaunchable', 'the node cannot run the worker 10m after its creation') });
    expect(nodeStatus(node(), overdue, config, NOW)).toMatchObject({ state: 'Waiting', lastOutcome: 'NodeNotLaunchable' });
    const slot = nv({ phase: 'Waiting', attempt: 0, conditions: condition('Unknown', 'WaitingForSlot', 'waiting for a free verification slot') });
    expect(nodeStatus(node(), slot, config, NOW)).toMatchObject({ state: 'Waiting', lastOutcome: 'WaitingForSlot' });
  });

  it('a node backing off after a failed attempt shows the attempt, the failures, the outcome and when the next attempt may start', () => {
    const status: NodeVerificationStatus = {
      phase: 'Backoff',
      attempt: 2,
      failures: 2,
      nextAttemptAt: at(70),
      lastAttempt: { attempt: 2, reason: 'ChecksFailed', message: 'dns: lookup kubernetes.default: i/o timeout', finishedAt: at(55) },
      conditions: condition('False', 'ChecksFailed', 'attempt 2 of 3 failed: dns; next attempt in 10s'),
    };
    expect(nodeStatus(node(), nv(status), config, NOW)).toEqual({
      node: 'n1',
      state: 'Backoff',
      attempt: 2,
      failures: 2,
      lastOutcome: 'ChecksFailed',
      lastMessage: 'dns: lookup kubernetes.default: i/o timeout',
      tainted: true,
      verified: false,
      ageSeconds: 60,
      nextAttemptAt: '2025-01-01T00:01:10.000Z',
    });
  });

  it('a verified, opened node shows when it passed and how long that took from its creation', () => {
    const status: NodeVerificationStatus = { phase: 'Passed', attempt: 1, failures: 0, verifiedAt: at(42), lastAttempt: { attempt: 1, reason: 'Passed', message: 'all checks passed' } };
    expect(nodeStatus(node({ tainted: false, verified: true }), nv(status), config, NOW)).toMatchObject({
      state: 'Verified',
      attempt: 1,
      lastOutcome: 'Passed',
      verifiedAt: '2025-01-01T00:00:42.000Z',
      timeToVerifiedSeconds: 42,
    });
  });

  it('a node out of attempts is Failed, with the last attempt', () => {
    const status: NodeVerificationStatus = {
      phase: 'Failed',
      attempt: 3,
      failures: 3,
      failedAt: at(58),
      lastAttempt: { attempt: 3, reason: 'ChecksFailed', message: 'dns: no answer' },
      conditions: condition('False', 'RetriesExhausted', 'no attempts left'),
    };
    expect(nodeStatus(node(), nv(status), config, NOW)).toMatchObject({ state: 'Failed', attempt: 3, failures: 3, lastOutcome: 'ChecksFailed', lastMessage: 'dns: no answer' });
  });

  it("a NodeVerification written for another Node of the same name (an earlier one, deleted and re-created) is not this node's progress", () => {
    const old = nv({ phase: 'Failed', attempt: 3, failures: 3, lastAttempt: { attempt: 3, reason: 'ChecksFailed', message: 'dns: no answer' } }, 'u0');
    expect(nodeStatus(node(), old, config, NOW)).toMatchObject({ state: 'Pending', attempt: 0, failures: 0, lastOutcome: '', lastMessage: '' });
    expect(nodeStatus(node({ tainted: false }), old, config, NOW).state).toBe('Unmanaged');
  });

  it('the table has a row per node: state, attempt, last result, age and time to verified', () => {
    const verified = nodeStatus(node({ tainted: false, verified: true }), nv({ phase: 'Passed', attempt: 1, failures: 0, verifiedAt: at(42), lastAttempt: { attempt: 1, reason: 'Passed', message: '' } }), config, NOW);
    const pending = { ...nodeStatus(node(), undefined, config, NOW), node: 'n2' };
    expect(renderStatus({ leader: { identity: 'pod-a_1234', renewedSecondsAgo: 2 }, nodes: [verified, pending] }).split('\n')).toEqual([
      'leader: pod-a_1234 (renewed 2s ago)',
      'NODE  STATE     ATTEMPT  LAST CHECK RESULT  AGE  TIME TO VERIFIED',
      'n1    Verified  1        Passed             1m   42s',
      'n2    Pending   -        -                  1m   -',
    ]);
  });
});
