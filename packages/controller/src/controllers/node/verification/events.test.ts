import { describe, expect, it } from 'vitest';
import { testConfig } from '../../../testing/builders.js';
import { desiredCondition } from './condition.js';
import type { Action } from './decide.js';
import { completedEvents } from './events.js';
import { Outcome, Phase, type AttemptResult, type VerificationState } from './types.js';

const config = testConfig(); // maxRetries 5: 6 attempts
const T0 = Date.UTC(2025, 0, 1);

function complete(result: Partial<AttemptResult>, state: Partial<VerificationState>, requeueAfterMs?: number, tellPass = true): Extract<Action, { kind: 'Complete' }> {
  return {
    kind: 'Complete',
    attempt: 3,
    result: { outcome: Outcome.ChecksFailed, message: 'check failed: dns: timeout', failedChecks: ['dns'], checks: [], warnings: [], ...result },
    state: { uid: 'u', attempt: 3, failures: 2, phase: Phase.Backoff, nextAttemptAt: T0, ...state },
    open: result.outcome === Outcome.Passed,
    deletePod: false,
    tellPass,
    cleanup: [],
    ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}),
  };
}

describe('events', () => {
  it('names the failed check and when it retries', () => {
    expect(completedEvents(complete({}, {}, 20_000), config, { dryRun: false, removedTaints: [] })).toEqual([
      { type: 'Warning', reason: 'VerificationChecksFailed', message: 'attempt 2 of 6 failed: check failed: dns: timeout; retrying in 20s' },
    ]);
  });

  it('adds the verdict after the last attempt', () => {
    const events = completedEvents(complete({ outcome: Outcome.NotScheduled, message: 'not scheduled' }, { failures: 6, phase: Phase.Failed }), config, { dryRun: false, removedTaints: [] });
    expect(events.map((e) => e.reason)).toEqual(['VerificationWorkerNotScheduled', 'VerificationFailed']);
    expect(events[1]?.message).toBe('node failed verification after 6 attempts and keeps its taint; last: not scheduled');
  });

  it('says what opening the node did after earlier attempts, or would do in a dry run', () => {
    const passed = complete({ outcome: Outcome.Passed, message: 'all checks passed in 1.2s (dns, api)' }, { phase: Phase.Passed, failures: 0 });
    expect(completedEvents(passed, config, { dryRun: false, removedTaints: ['node-ready/unverified=true:NoSchedule'] })).toEqual([
      { type: 'Normal', reason: 'VerificationPassed', message: 'all checks passed in 1.2s (dns, api) (after 2 earlier attempts); removed taint node-ready/unverified=true:NoSchedule and added label node-ready/verified=true' },
    ]);
    expect(completedEvents(passed, config, { dryRun: true, removedTaints: ['node-ready/unverified=true:NoSchedule'] })[0]).toEqual({
      type: 'Normal',
      reason: 'DryRunWouldOpenNode',
      message: 'all checks passed in 1.2s (dns, api); dry run: would remove taint node-ready/unverified=true:NoSchedule and add label node-ready/verified=true',
    });
  });
});

describe('a pass at the first attempt', () => {
  it('has no Event of its own (the condition and the NodeVerification say it); a dry run still says what it would do', () => {
    const first = { ...complete({ outcome: Outcome.Passed, message: 'all checks passed in 1.2s (dns, api)' }, { phase: Phase.Passed, failures: 0, attempt: 1 }, undefined, false), attempt: 1 };
    expect(completedEvents(first, config, { dryRun: false, removedTaints: ['node-ready/unverified=true:NoSchedule'] })).toEqual([]);
    expect(completedEvents(first, config, { dryRun: true, removedTaints: [] }).map((e) => e.reason)).toEqual(['DryRunWouldOpenNode']);
  });

  it('after one earlier attempt, says so in the singular', () => {
    const second = { ...complete({ outcome: Outcome.Passed, message: 'all checks passed' }, { phase: Phase.Passed, failures: 0, attempt: 2 }), attempt: 2 };
    expect(completedEvents(second, config, { dryRun: false, removedTaints: [] })[0]?.message).toBe('all checks passed (after an earlier attempt); added label node-ready/verified=true');
  });
});

describe('warning events', () => {
  const slow = { check: 'dns', message: 'dns: kubernetes.default.svc.cluster.local @10.96.0.10:53: slow: 3.5s (over dns.slowAfter 1s)' };
  const mtu = { check: 'mtu', message: 'mtu: the pod MTU could not be read: tested 1500-byte packets' };
  const pod = { namespace: 'kube-system', name: 'knr-n-1234abcd-a3' };

  it('one Warning Event after the outcome, naming each check and finding, for a pass', () => {
    const passed = { ...complete({ outcome: Outcome.Passed, message: 'all checks passed with warnings in 4s (dns, mtu): ...', warnings: [slow, mtu] }, { phase: Phase.Passed, failures: 0 }), pod };
    expect(completedEvents(passed, config, { dryRun: false, removedTaints: [] }).map((e) => [e.type, e.reason])).toEqual([
      ['Normal', 'VerificationPassed'],
      ['Warning', 'VerificationWarning'],
    ]);
    expect(completedEvents(passed, config, { dryRun: false, removedTaints: [] })[1]?.message).toBe(
      `worker pod kube-system/knr-n-1234abcd-a3 reported 2 warnings: ${slow.message}; ${mtu.message}`,
    );
    expect(completedEvents(passed, config, { dryRun: true, removedTaints: [] }).map((e) => e.reason)).toEqual(['DryRunWouldOpenNode', 'VerificationWarning']);
  });

  it('also for a failed attempt, before the verdict', () => {
    const last = { ...complete({ warnings: [slow] }, { failures: 6, phase: Phase.Failed }), pod };
    const events = completedEvents(last, config, { dryRun: false, removedTaints: [] });
    expect(events.map((e) => e.reason)).toEqual(['VerificationChecksFailed', 'VerificationWarning', 'VerificationFailed']);
    expect(events[1]?.message).toBe(`worker pod kube-system/knr-n-1234abcd-a3 reported 1 warning: ${slow.message}`);
  });

  it('none without warnings', () => {
    expect(completedEvents(complete({}, {}, 1_000), config, { dryRun: false, removedTaints: [] }).map((e) => e.reason)).toEqual(['VerificationChecksFailed']);
  });
});

describe('desiredCondition', () => {
  const type = 'kube-node-ready.io/NetworkVerified';
  it.each<[string, VerificationState, object]>([
    ['verifying', { uid: 'u', attempt: 4, failures: 1, phase: Phase.Verifying }, { type, status: 'Unknown', reason: 'Verifying', message: 'attempt 2 of 6 in progress' }],
    ['passed', { uid: 'u', attempt: 4, failures: 0, phase: Phase.Passed, lastMessage: 'all checks passed in 1s (dns)' }, { type, status: 'True', reason: 'Passed', message: 'all checks passed in 1s (dns)' }],
    [
      'passed with warnings',
      { uid: 'u', attempt: 4, failures: 0, phase: Phase.Passed, lastMessage: 'all checks passed with warnings in 4s (dns): dns: slow: 3.5s' },
      { type, status: 'True', reason: 'Passed', message: 'all checks passed with warnings in 4s (dns): dns: slow: 3.5s' },
    ],
    [
      'backing off',
      { uid: 'u', attempt: 4, failures: 2, phase: Phase.Backoff, nextAttemptAt: T0 + 20_000, lastOutcome: Outcome.ChecksFailed, lastMessage: 'check failed: dns: timeout' },
      { type, status: 'False', reason: 'ChecksFailed', message: 'attempt 2 of 6 failed: check failed: dns: timeout; next attempt at 2025-01-01T00:00:20Z' },
    ],
    [
      'failed',
      { uid: 'u', attempt: 6, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.WorkerError, lastMessage: 'exit 3' },
      { type, status: 'False', reason: 'RetriesExhausted', message: 'verification failed after 6 attempts; last: WorkerError: exit 3' },
    ],
  ])('%s', (_name, state, expected) => {
    expect(desiredCondition(state, config)).toEqual(expected);
  });

  it('uses the configured condition type', () => {
    const cfg = testConfig({ nodeManagement: { condition: { type: 'example.com/NetworkReady' } } });
    expect(desiredCondition({ uid: 'u', attempt: 1, failures: 0, phase: Phase.Verifying }, cfg).type).toBe('example.com/NetworkReady');
  });
});
