import type { V1Node } from '@kubernetes/client-node';
import type { ControllerConfig } from '../config/schema.js';
import { carried, isCandidate, isVerified, launchBlockers } from '../controllers/node/verification/decide.js';
import type { StateRead } from '../controllers/node/verification/store.js';
import { Phase, type VerificationState } from '../controllers/node/verification/types.js';
import { nodeUid } from '../kube/objects.js';

/**
 * DaemonSet mode: the agent's next step on its own node, as one pure function of the node, its
 * stored progress and the time. The same NodeVerification status, backoff and retry rules as the controller's state machine
 * (decide.ts), without its worker pods: the agent runs the checks itself.
 *
 *   Idle     nothing to do (verified, not a candidate, failed, going away); look again later
 *   Wait     Backoff until the next attempt time, or the node cannot run a verification yet
 *   Attempt  start attempt `state.attempt` (stored before the checks run)
 *
 * An attempt stored as Verifying that this agent did not finish (the pod restarted mid-run) is
 * not counted against the node: the next attempt has a new number and the same failure count.
 */
export type AgentStep =
  | { kind: 'Idle'; reason: 'NodeDeleting' | 'Verified' | 'NotCandidate' | 'Failed' }
  | { kind: 'Wait'; reason: 'Backoff'; untilMs: number }
  | { kind: 'Wait'; reason: 'NodeNotLaunchable'; waitingFor: string[] }
  | { kind: 'Attempt'; state: VerificationState; interrupted?: number };

export function agentStep(node: V1Node, read: StateRead, now: number, config: ControllerConfig): AgentStep {
  if (node.metadata?.deletionTimestamp) return { kind: 'Idle', reason: 'NodeDeleting' };
  if (isVerified(node, config)) return { kind: 'Idle', reason: 'Verified' };

  const state = read.kind === 'ok' ? read.state : undefined;
  if (!isCandidate(node, state, config)) return { kind: 'Idle', reason: 'NotCandidate' };

  if (state?.phase === Phase.Failed) return { kind: 'Idle', reason: 'Failed' };
  // Dry run: the node passed but was left tainted on purpose; it is not verified again.
  if (state?.phase === Phase.Passed && config.dryRun) return { kind: 'Idle', reason: 'Verified' };
  if (state?.phase === Phase.Backoff && state.nextAttemptAt !== undefined && now < state.nextAttemptAt) {
    return { kind: 'Wait', reason: 'Backoff', untilMs: state.nextAttemptAt };
  }
  const waitingFor = launchBlockers(node, config);
  if (waitingFor.length > 0) return { kind: 'Wait', reason: 'NodeNotLaunchable', waitingFor };

  const attempt = (state?.attempt ?? 0) + 1;
  return {
    kind: 'Attempt',
    state: { ...carried(state, nodeUid(node)), attempt, phase: Phase.Verifying },
    ...(state?.phase === Phase.Verifying ? { interrupted: state.attempt } : {}),
  };
}
