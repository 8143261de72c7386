import { formatDuration } from '@kube-node-ready/core';
import type { ControllerConfig } from '../../../config/schema.js';
import { EventType, Reason } from '../../../events/reasons.js';
import { POD_REFUSED_RETRY_MS, type Action } from './decide.js';
import { Outcome, Phase } from './types.js';

/** What to say on the Node about a step of its verification (pure; the controller records it). */
export interface NodeEvent {
  type: EventType;
  reason: Reason;
  message: string;
}

const OUTCOME_REASON: Record<Outcome, Reason> = {
  [Outcome.Passed]: Reason.VerificationPassed,
  [Outcome.ChecksFailed]: Reason.VerificationChecksFailed,
  [Outcome.WorkerError]: Reason.VerificationWorkerError,
  [Outcome.NotScheduled]: Reason.VerificationWorkerNotScheduled,
  [Outcome.NotStarted]: Reason.VerificationWorkerNotStarted,
  [Outcome.DeadlineExceeded]: Reason.VerificationDeadlineExceeded,
  [Outcome.PodDeleted]: Reason.VerificationWorkerPodDeleted,
  [Outcome.ClusterWide]: Reason.VerificationInconclusive,
  [Outcome.StartupTimeout]: Reason.VerificationStartupTimeout,
};

export function outcomeReason(outcome: Outcome): Reason {
  return OUTCOME_REASON[outcome];
}

/**
 * Events for a finished attempt: its outcome, the worker's warnings if it had any (one Event for
 * all of them), and when it was the last attempt, the verdict. `removedTaints` names what the open
 * removed (or would remove in dry run). A pass at the first attempt of a verification has no Event
 * of its own: the node's condition and its NodeVerification say it (as they say every verdict, so
 * nothing is lost where a burst's Events are dropped or merged); a pass after failed or
 * inconclusive attempts, whose Events the node has, is told.
 */
export function completedEvents(
  action: Extract<Action, { kind: 'Complete' }>,
  config: ControllerConfig,
  opts: { dryRun: boolean; removedTaints: readonly string[] },
): NodeEvent[] {
  const { result, state } = action;
  const max = config.reconciliation.maxRetries + 1;
  const { key, value } = config.nodeManagement.verifiedLabel;
  const label = `${key}=${value}`;

  const warnings = warningEvent(action);
  if (result.outcome === Outcome.Passed) {
    const taints = opts.removedTaints.length > 0 ? `removed taint ${opts.removedTaints.join(', ')} and ` : '';
    if (opts.dryRun) {
      const would = opts.removedTaints.length > 0 ? `remove taint ${opts.removedTaints.join(', ')} and ` : '';
      return [{ type: EventType.Normal, reason: Reason.DryRunWouldOpenNode, message: `${result.message}; dry run: would ${would}add label ${label}` }, ...warnings];
    }
    if (!action.tellPass) return warnings;
    const earlier = action.attempt - 1 === 1 ? 'an earlier attempt' : `${action.attempt - 1} earlier attempts`;
    return [{ type: EventType.Normal, reason: Reason.VerificationPassed, message: `${result.message} (after ${earlier}); ${taints}added label ${label}` }, ...warnings];
  }

  if (result.outcome === Outcome.StartupTimeout) {
    return [{ type: EventType.Warning, reason: Reason.VerificationStartupTimeout, message: `${result.message}; ${startupTimeoutVerdict(config, opts)}` }];
  }
  const next = state.phase === Phase.Backoff && action.requeueAfterMs !== undefined ? `; retrying in ${Math.round(action.requeueAfterMs / 1000)}s` : '';
  if (result.outcome === Outcome.ClusterWide) {
    const counted = `${state.failures} of ${max} counted attempts failed so far`;
    return [{ type: EventType.Warning, reason: Reason.VerificationInconclusive, message: `attempt inconclusive, not counted against the node (${counted}): ${result.message}${next}` }, ...warnings];
  }
  const attempt = `attempt ${state.failures} of ${max}`;
  const events: NodeEvent[] = [{ type: EventType.Warning, reason: outcomeReason(result.outcome), message: `${attempt} failed: ${result.message}${next}` }, ...warnings];
  if (state.phase === Phase.Failed) {
    events.push({
      type: EventType.Warning,
      reason: Reason.VerificationFailed,
      message: `node failed verification after ${state.failures} attempts and keeps its taint; last: ${result.message}`,
    });
  }
  return events;
}

/** What a startup timeout did to the node (nodeManagement.onStartupTimeout), for its Event. */
function startupTimeoutVerdict(config: ControllerConfig, opts: { dryRun: boolean; removedTaints: readonly string[] }): string {
  switch (config.nodeManagement.onStartupTimeout) {
    case 'keep':
      return 'the node is marked failed and keeps its taint (onStartupTimeout: keep)';
    case 'replace':
      return 'the node is marked failed and goes to remediation, whose guards apply (onStartupTimeout: replace)';
    case 'open': {
      const taints = opts.removedTaints.join(', ') || 'none left';
      return opts.dryRun ? `dry run: would open it unverified, removing taint ${taints} (onStartupTimeout: open)` : `opened unverified: removed taint ${taints}, no verified label (onStartupTimeout: open)`;
    }
  }
}

/** The worker's warnings, each naming its check (`dns: ... slow: 3.5s ...`), in one Event; none without warnings. */
function warningEvent(action: Extract<Action, { kind: 'Complete' }>): NodeEvent[] {
  const { warnings } = action.result;
  if (warnings.length === 0) return [];
  const who = action.pod ? `worker pod ${action.pod.namespace}/${action.pod.name}` : 'the worker';
  const count = warnings.length === 1 ? '1 warning' : `${warnings.length} warnings`;
  return [{ type: EventType.Warning, reason: Reason.VerificationWarning, message: `${who} reported ${count}: ${warnings.map((w) => w.message).join('; ')}` }];
}

export function awaitingRegistrationEvent(): NodeEvent {
  return {
    type: EventType.Normal,
    reason: Reason.AwaitingKarpenterRegistration,
    message: 'verification passed; waiting for karpenter.sh/registered=true before removing the taint (Karpenter would re-add it)',
  };
}

/** The node cannot run the worker yet (decide(): NodeNotLaunchable). */
export function waitingForNodeEvent(waitingFor: readonly string[], overdue: boolean, config: ControllerConfig): NodeEvent {
  return overdue
    ? {
        type: EventType.Warning,
        reason: Reason.NodeNotLaunchable,
        message: `the node cannot run the worker ${formatDuration(config.nodeManagement.bringUpTimeout)} after its creation (nodeManagement.bringUpTimeout); waiting for: ${waitingFor.join('; ')}`,
      }
    : { type: EventType.Normal, reason: Reason.VerificationWaitingForNode, message: `no attempt until the node can run the worker; waiting for: ${waitingFor.join('; ')}` };
}

/** The node's readiness gates do not hold (decide(): GatesPending): before any attempt (overdue past bringUpTimeout), or after attempt `passed` passed. */
export function waitingForGatesEvent(waitingFor: readonly string[], overdue: boolean, config: ControllerConfig, passed?: number): NodeEvent {
  const what = `waiting for: ${waitingFor.join('; ')}`;
  if (passed !== undefined) return { type: EventType.Normal, reason: Reason.VerificationWaitingForGates, message: `attempt ${passed} passed; the node opens once its readiness gates hold; ${what}` };
  return overdue
    ? {
        type: EventType.Warning,
        reason: Reason.GatesNotReady,
        message: `the node's readiness gates do not hold ${formatDuration(config.nodeManagement.bringUpTimeout)} after its creation (nodeManagement.bringUpTimeout); ${what}`,
      }
    : { type: EventType.Normal, reason: Reason.VerificationWaitingForGates, message: `no attempt until the node's readiness gates hold; ${what}` };
}

/** A node the worker cannot run on (decide(): UnsupportedOS). */
export function unsupportedOSEvent(os: string, config: ControllerConfig): NodeEvent {
  return {
    type: EventType.Warning,
    reason: Reason.NodeOSUnsupported,
    message: `the verification worker runs on Linux only and this node's kubernetes.io/os is ${os}: no worker is launched, the node keeps its verification taint and is not remediated. Keep ${config.nodeManagement.taints.map((t) => t.key).join(', ')} off ${os} nodes (their NodePool's startupTaints), or remove it from this node by hand`,
  };
}

/** The API server refused the worker pod: not an attempt, and not the node's fault. */
export function podRefusedEvent(pod: string, message: string): NodeEvent {
  return {
    type: EventType.Warning,
    reason: Reason.WorkerPodRefused,
    message: `the API server refused worker pod ${pod}: ${message}; not counted as an attempt (not the node's fault), tried again every ${formatDuration(POD_REFUSED_RETRY_MS)}. Check admission webhooks and policies, ResourceQuotas and Pod Security for the worker namespace`,
  };
}
