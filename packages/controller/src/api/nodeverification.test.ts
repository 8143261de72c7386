import { describe, expect, it } from 'vitest';
import { aNode } from '../testing/builders.js';
import { Outcome, Phase, type VerificationState } from '../controllers/node/verification/types.js';
import { installationOf, INSTALLATION_LABEL, newNodeVerification, parseStatus, stateOf, statusOf, type NodeVerification } from './nodeverification.js';

const T0 = Date.UTC(2026, 0, 1);
const node = aNode('n1').uid('u1').createdAt(T0).build();
const unknown = { type: 'Verified', status: 'Unknown' as const, reason: 'Verifying', message: 'attempt 2 of 3 in progress' };

/** Every field the state can carry, times on whole seconds (status has a second's precision). */
const full: VerificationState = {
  uid: 'u1',
  attempt: 2,
  failures: 1,
  phase: Phase.Backoff,
  nextAttemptAt: T0 + 60_000,
  lastOutcome: Outcome.ChecksFailed,
  lastMessage: 'check failed: dns: timeout',
  lastAttempt: 2,
  lastChecks: [
    { name: 'dns', ok: false, durationMs: 5000, error: 'timeout', target: '10.96.0.10:53' },
    { name: 'api', ok: true, durationMs: 12 },
  ],
  lastFinishedAt: T0 + 30_000,
  pod: 'kube-system/knr-n1-a2',
  launchableAt: T0 + 4_000,
  firstLaunchAt: T0 + 5_000,
  verifiedAt: T0 - 86_400_000,
  failing: { since: T0 + 10_000, at: T0 + 30_000, checks: { dns: '10.96.0.10:53' } },
};

function resource(status?: NodeVerification['status'], installation = installationOf('a/B')): NodeVerification {
  return { ...newNodeVerification(node, installation), metadata: { name: 'n1', uid: 'nv1', generation: 1, labels: { [INSTALLATION_LABEL]: installation } }, ...(status ? { status } : {}) };
}

describe('NodeVerification status', () => {
  it('holds every field of the state: written and read back, it is the same state', () => {
    const status = statusOf(full, node, unknown, resource(), T0 + 31_000);
    expect(parseStatus('u1', status)).toEqual({ kind: 'ok', state: full });
    expect(status).toMatchObject({ phase: 'Backoff', nodeCreatedAt: '2026-01-01T00:00:00Z', lastAttempt: { attempt: 2, reason: 'ChecksFailed', finishedAt: '2026-01-01T00:00:30Z' } });
    // Without a status subresource every write moves the generation: an observedGeneration would always lag it.
    expect(status).not.toHaveProperty('observedGeneration');
    expect(status.conditions?.[0]).not.toHaveProperty('observedGeneration');
  });

  it('keeps the condition\'s transition time while its status stays, and moves it when the status changes', () => {
    const first = statusOf(full, node, unknown, resource(), T0 + 1_000);
    const same = statusOf(full, node, { ...unknown, message: 'attempt 3 of 3 in progress' }, resource(first), T0 + 9_000);
    expect(same.conditions?.[0]?.lastTransitionTime).toBe(first.conditions?.[0]?.lastTransitionTime);
    const passed = statusOf(full, node, { type: 'Verified', status: 'True', reason: 'Passed', message: 'ok' }, resource(first), T0 + 9_000);
    expect(passed.conditions?.[0]?.lastTransitionTime).toBe('2026-01-01T00:00:09Z');
  });

  it('is no progress of this node when written for another node UID, and unusable when another installation wrote it', () => {
    const status = statusOf(full, node, unknown, resource(), T0);
    expect(stateOf({ ...resource(status), spec: { nodeName: 'n1', nodeUID: 'old' } }, node)).toEqual({ kind: 'none' });
    expect(stateOf(resource(status), node, installationOf('a/B'))).toMatchObject({ kind: 'ok' });
    expect(stateOf(resource(status), node, installationOf('other/C'))).toMatchObject({ kind: 'invalid', problem: expect.stringContaining('another installation') });
    expect(stateOf(undefined, node)).toEqual({ kind: 'none' });
    expect(stateOf(resource(), node)).toEqual({ kind: 'none' }); // created, no status yet
  });

  it('refuses a status it cannot use: an unknown phase, no attempt outside Waiting, Backoff without its time', () => {
    expect(parseStatus('u1', { phase: 'Sleeping' as Phase, attempt: 1 })).toMatchObject({ kind: 'invalid' });
    expect(parseStatus('u1', { phase: Phase.Verifying, attempt: 0 })).toMatchObject({ kind: 'invalid' });
    expect(parseStatus('u1', { phase: Phase.Backoff, attempt: 1, failures: 1 })).toMatchObject({ kind: 'invalid' });
    expect(parseStatus('u1', { phase: Phase.Waiting, attempt: 0, failures: 0 })).toEqual({ kind: 'ok', state: { uid: 'u1', attempt: 0, failures: 0, phase: Phase.Waiting } });
    // A startup timeout can fail a node before its first attempt; any other Failed has had one.
    expect(parseStatus('u1', { phase: Phase.Failed, attempt: 0, lastAttempt: { attempt: 0, reason: Outcome.StartupTimeout, message: 'no verdict' } })).toMatchObject({ kind: 'ok', state: { attempt: 0, phase: Phase.Failed, lastOutcome: Outcome.StartupTimeout } });
    expect(parseStatus('u1', { phase: Phase.Failed, attempt: 0, lastAttempt: { attempt: 0, reason: Outcome.ChecksFailed, message: 'x' } })).toMatchObject({ kind: 'invalid' });
  });
});
