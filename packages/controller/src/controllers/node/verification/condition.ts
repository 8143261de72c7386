import { formatDuration } from '@kube-node-ready/core';
import type { ControllerConfig } from '../../../config/schema.js';
import type { ConditionInput } from './node-patch.js';
import { formatTime } from '../../../api/nodeverification.js';
import { Outcome, Phase, type VerificationState } from './types.js';

/**
 * The verdict as a condition, a pure function of the stored progress: the same state always gives
 * the same condition. NodeVerification status carries it at every step (type Verified); the Node
 * carries it (type nodeManagement.condition.type, default kube-node-ready.io/NetworkVerified) only
 * for final verdicts (isFinal), so a verified node costs two Node writes: the opening and this.
 *
 *   status   reason                      when
 *   Unknown  Verifying                   an attempt is running
 *   True     Passed                      the node passed and was opened
 *   False    <outcome of last attempt>   an attempt failed; another follows after a backoff
 *   False    RetriesExhausted            no attempts left; the taint stays
 *   False    StartupTimeout              no verdict within nodeManagement.startupTimeout (kept, opened unverified, or replaced)
 *   Unknown  WaitingForNode              the node cannot run the worker yet (no attempt used)
 *   Unknown  WaitingForSlot              every verification slot is taken (reconciliation.maxConcurrentVerifications)
 *   False    NodeNotLaunchable           ... and still cannot nodeManagement.bringUpTimeout after its creation
 *   Unknown  WaitingForGates             the readiness gates do not hold (before the first attempt, or after one passed)
 *   False    GatesNotReady               ... still not, nodeManagement.bringUpTimeout after its creation, and no attempt started
 */
export const ConditionReason = {
  Verifying: 'Verifying',
  WaitingForNode: 'WaitingForNode',
  WaitingForSlot: 'WaitingForSlot',
  NodeNotLaunchable: 'NodeNotLaunchable',
  WaitingForGates: 'WaitingForGates',
  GatesNotReady: 'GatesNotReady',
  Passed: 'Passed',
  RetriesExhausted: 'RetriesExhausted',
  UnsupportedOS: 'UnsupportedOS',
  /** No verdict within nodeManagement.startupTimeout (the message says what onStartupTimeout did). */
  StartupTimeout: 'StartupTimeout',
} as const;

export function desiredCondition(state: VerificationState, config: ControllerConfig): ConditionInput {
  const type = config.nodeManagement.condition.type;
  const max = config.reconciliation.maxRetries + 1;
  const last = state.lastMessage ?? 'no details';
  switch (state.phase) {
    case Phase.Waiting:
      return { type, status: 'Unknown', reason: ConditionReason.WaitingForSlot, message: 'waiting for a free verification slot (reconciliation.maxConcurrentVerifications)' };
    case Phase.Verifying:
      return { type, status: 'Unknown', reason: ConditionReason.Verifying, message: `attempt ${state.failures + 1} of ${max} in progress` };
    case Phase.Passed:
      return { type, status: 'True', reason: ConditionReason.Passed, message: state.lastMessage ?? 'all checks passed' };
    case Phase.Backoff: {
      const next = state.nextAttemptAt === undefined ? '' : `; next attempt at ${formatTime(state.nextAttemptAt)}`;
      // A cluster-wide fault says nothing about the node: Unknown, not False.
      if (state.lastOutcome === Outcome.ClusterWide) {
        return { type, status: 'Unknown', reason: Outcome.ClusterWide, message: `attempt inconclusive, not counted against the node: ${last}${next}` };
      }
      return { type, status: 'False', reason: state.lastOutcome ?? 'Failed', message: `attempt ${state.failures} of ${max} failed: ${last}${next}` };
    }
    case Phase.Failed:
      if (state.lastOutcome === Outcome.StartupTimeout) return { type, status: 'False', reason: ConditionReason.StartupTimeout, message: last };
      return {
        type,
        status: 'False',
        reason: ConditionReason.RetriesExhausted,
        message: `verification failed after ${state.failures} attempts; last: ${state.lastOutcome ?? 'unknown'}: ${last}`,
      };
  }
}

/** The condition of a node the worker cannot run on at all (decide(): UnsupportedOS). */
export function unsupportedOSCondition(os: string, config: ControllerConfig): ConditionInput {
  return {
    type: config.nodeManagement.condition.type,
    status: 'False',
    reason: ConditionReason.UnsupportedOS,
    message: `the verification worker runs on Linux only; this node's kubernetes.io/os is ${os}: not verified, the verification taint stays`,
  };
}

/** The condition of a node that cannot run the worker yet (decide(): NodeNotLaunchable); no stored progress is involved. */
export function waitingCondition(waitingFor: readonly string[], overdue: boolean, config: ControllerConfig): ConditionInput {
  const type = config.nodeManagement.condition.type;
  const what = `waiting for: ${waitingFor.join('; ')}`;
  return overdue
    ? { type, status: 'False', reason: ConditionReason.NodeNotLaunchable, message: `the node cannot run the worker ${formatDuration(config.nodeManagement.bringUpTimeout)} after its creation (nodeManagement.bringUpTimeout); ${what}` }
    : { type, status: 'Unknown', reason: ConditionReason.WaitingForNode, message: `no attempt until the node can run the worker; ${what}` };
}

/**
 * The condition of a node whose readiness gates do not hold (decide(): GatesPending): before any
 * attempt (overdue past bringUpTimeout), or after attempt `passed` passed.
 */
export function gatesCondition(waitingFor: readonly string[], overdue: boolean, config: ControllerConfig, passed?: number): ConditionInput {
  const type = config.nodeManagement.condition.type;
  const what = `waiting for: ${waitingFor.join('; ')}`;
  if (passed !== undefined) return { type, status: 'Unknown', reason: ConditionReason.WaitingForGates, message: `attempt ${passed} passed; the node opens once its readiness gates hold; ${what}` };
  return overdue
    ? { type, status: 'False', reason: ConditionReason.GatesNotReady, message: `the node's readiness gates do not hold ${formatDuration(config.nodeManagement.bringUpTimeout)} after its creation (nodeManagement.bringUpTimeout); ${what}` }
    : { type, status: 'Unknown', reason: ConditionReason.WaitingForGates, message: `no attempt until the node's readiness gates hold; ${what}` };
}

/**
 * Whether the condition is a verdict the Node itself carries: passed, failed for good, never
 * launchable within bringUpTimeout, an operating system the worker cannot run on. The steps in
 * between (verifying, backing off, waiting) are only in the NodeVerification.
 */
export function isFinal(condition: Pick<ConditionInput, 'reason'>): boolean {
  return (
    condition.reason === ConditionReason.Passed ||
    condition.reason === ConditionReason.RetriesExhausted ||
    condition.reason === ConditionReason.StartupTimeout ||
    condition.reason === ConditionReason.NodeNotLaunchable ||
    condition.reason === ConditionReason.GatesNotReady ||
    condition.reason === ConditionReason.UnsupportedOS
  );
}

/**
 * Whether the Node's condition is written with `wanted`: a final verdict always; a step only while
 * the Node still carries a verdict of an earlier verification (a node verified again: its `True`
 * is withdrawn, `Unknown` while the new one runs, so the node-readiness-controller's continuous
 * rules and anyone reading the Node see it no longer holds). A node verified for the first time
 * carries none, so its steps cost no Node write.
 */
export function writesToNode(wanted: ConditionInput, existing: { reason?: string } | undefined): boolean {
  return isFinal(wanted) || (existing !== undefined && isFinal({ reason: existing.reason ?? '' }));
}
