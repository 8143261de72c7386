import type { V1Node } from '@kubernetes/client-node';
import { formatDuration } from '@kube-node-ready/core';
import type { ControllerConfig } from '../../../config/schema.js';
import { annotation, label, nodeName, toMillis } from '../../../kube/objects.js';
import { backoffDelay, hasVerificationTaint, isVerified, unsupportedOS } from '../verification/decide.js';
import { RUN_GRACE_MS } from '../verification/pod-result.js';
import type { StateRead } from '../verification/store.js';
import { Outcome, Phase, type VerificationState } from '../verification/types.js';
import type { RemediationConfig } from './config.js';
import type { Target } from './executor.js';
import { CONTROL_PLANE_LABELS, KarpenterApi, OPT_IN_VALUE, OPT_OUT_ANNOTATION, type BlockReason } from './names.js';

/**
 * Remediation's decision for one node, as one pure function: no I/O, time passed in. The guards
 * are applied in a fixed order (docs/remediation.md), and the first that holds decides:
 *
 *   1. remediation enabled (nodeManagement.deleteFailedNodes)           else ignore
 *   2. the node is not being deleted already                            else ignore
 *   3. the node failed: phase Failed (retries exhausted), or stuck      else ignore
 *   4. it never passed a verification, and still carries the taint     else skip
 *   5. not a control-plane node                                         else skip
 *   6. no opt-out annotation (kube-node-ready.io/remediation)           else skip
 *   7. not karpenter.sh/do-not-disrupt=true, on the Node or its NodeClaim;
 *      the NodeClaim match is not ambiguous, and it is not being deleted already  else skip
 *   8. at least remediation.minNodeAge old                              else skip, retry when old enough
 *   9. circuit breaker closed                                           else blocked
 *  10. under the in-flight and hourly limits (the ledger readable)      else blocked
 *  11. dry run                                                          -> dry-run
 *  12.                                                                  -> delete
 *
 * `ignore` is silent (most nodes are simply not failed); every other decision is reported with an
 * Event and a metric by the remediator. The breaker and the limits are read only when guard 9 / 10
 * is reached, so evaluation order is the documented order. Table tests: decide.test.ts.
 */

export type IgnoreReason = 'Disabled' | 'NodeDeleting' | 'NotFailed';
export type SkipReason = 'WasVerified' | 'Untainted' | 'ControlPlane' | 'OptedOut' | 'DoNotDisrupt' | 'AmbiguousNodeClaim' | 'NodeClaimDeleting' | 'TooYoung';
/** Why the node is a remediation candidate. */
export type Trigger = 'failed' | 'stuck';

export type Decision =
  | { kind: 'ignore'; reason: IgnoreReason; requeueAfterMs?: number }
  | { kind: 'skip'; reason: SkipReason; trigger: Trigger; message: string; requeueAfterMs?: number }
  | { kind: 'blocked'; reason: BlockReason; trigger: Trigger; message: string; requeueAfterMs: number }
  | { kind: 'dry-run'; trigger: Trigger; message: string }
  | { kind: 'delete'; trigger: Trigger; message: string };

export type BreakerVerdict = { open: false } | { open: true; message: string; recheckAfterMs: number };
export type LimitVerdict = { ok: true } | { ok: false; reason: 'in-flight' | 'rate-limit' | 'ledger'; message: string; retryAfterMs: number };

export interface DecideContext {
  /** nodeManagement.deleteFailedNodes. */
  enabled: boolean;
  /** remediation.dryRun, or the controller-wide dryRun. */
  dryRun: boolean;
  /** The controller configuration (verification taints, verified label). */
  config: ControllerConfig;
  remediation: RemediationConfig;
  /** Where verification progress is read: the verification controller's ProgressStore (NodeVerifications; in dry run, memory). */
  readState: (node: V1Node) => StateRead;
  /**
   * What a deletion would remove (the NodeClaim lookup), when known: guard 7 reads the NodeClaim's
   * own do-not-disrupt annotation, an ambiguous match and a NodeClaim already being deleted.
   * Undefined: not looked up (yet), or the lookup failed; the deletion itself always looks up afresh.
   */
  target?: Target;
  /** What the stuck-node clock leaves out (stuckDeadline); without it, it counts from node creation. */
  stuckClock?: StuckClock;
  /** Guard 9, read only when reached. */
  breaker: () => BreakerVerdict;
  /** Guard 10, read only when reached. */
  limits: () => LimitVerdict;
}

/**
 * Time that is not the node's fault, left out of the stuck-node clock: before this controller
 * started leading (a new leader has stuckNodeTimeout to act itself before it calls a node stuck),
 * and the node's turns in line for a verification slot (verification/slots.ts).
 */
export interface StuckClock {
  /** When this replica started leading. */
  leadingSince: number | undefined;
  /** Whether the node is waiting for a verification slot now. */
  waiting(node: string): boolean;
  /** How long the node has waited for a slot in all. */
  queuedMs(node: string): number;
}

/** A node waiting in line for a slot is looked at again this often (it leaves the line by launching). */
export const STUCK_WAITING_RECHECK_MS = 60_000;

export function decide(node: V1Node, now: number, ctx: DecideContext): Decision {
  // 1. Switched off.
  if (!ctx.enabled) return { kind: 'ignore', reason: 'Disabled' };

  // 2. Someone (Karpenter, a person, us earlier) is deleting it already.
  if (node.metadata?.deletionTimestamp) return { kind: 'ignore', reason: 'NodeDeleting' };

  // 3. Only failed nodes: retries exhausted, or stuck before any worker could run.
  const read = ctx.readState(node);
  const state = read.kind === 'ok' ? read.state : undefined;
  const trigger = failureTrigger(node, state, now, ctx);
  if (!trigger) {
    if (ctx.stuckClock?.waiting(nodeName(node))) return { kind: 'ignore', reason: 'NotFailed', requeueAfterMs: STUCK_WAITING_RECHECK_MS };
    const stuckAt = stuckDeadline(node, state, ctx);
    return stuckAt !== undefined && stuckAt > now
      ? { kind: 'ignore', reason: 'NotFailed', requeueAfterMs: stuckAt - now }
      : { kind: 'ignore', reason: 'NotFailed' };
  }
  const why = triggerMessage(trigger, node, state, now, ctx);

  // 4. Never a node that passed a verification, or one someone opened by hand.
  if (isVerified(node, ctx.config) || state?.verifiedAt !== undefined) {
    const when = state?.verifiedAt !== undefined ? ` (it passed at ${new Date(state.verifiedAt).toISOString()})` : '';
    return skip('WasVerified', trigger, `not deleting: the node passed a verification before${when}; only nodes that never passed are replaced (${why})`);
  }
  if (!hasVerificationTaint(node, ctx.config)) {
    return skip('Untainted', trigger, `not deleting: the node failed verification but no longer carries the verification taint (removed by hand?); only nodes still closed are replaced (${why})`);
  }

  // 5. Never the control plane.
  const cp = CONTROL_PLANE_LABELS.find((l) => label(node, l) !== undefined);
  if (cp) return skip('ControlPlane', trigger, `not deleting: control-plane node (label ${cp}) (${why})`);

  // 6. The node opted out.
  const optOut = annotation(node, OPT_OUT_ANNOTATION);
  if (optOut !== undefined && optOut !== OPT_IN_VALUE) {
    return skip('OptedOut', trigger, `not deleting: annotation ${OPT_OUT_ANNOTATION}=${JSON.stringify(optOut)} (${why})`);
  }

  // 7. Karpenter's own opt-out, on the Node or its NodeClaim; and a NodeClaim we can act on.
  if (doNotDisrupt(node)) return skip('DoNotDisrupt', trigger, `not deleting: ${KarpenterApi.DoNotDisruptAnnotation}=true (${why})`);
  const target = ctx.target;
  if (target?.kind === 'nodeclaim' && target.doNotDisrupt) {
    return skip('DoNotDisrupt', trigger, `not deleting: NodeClaim ${target.claim.name} has ${KarpenterApi.DoNotDisruptAnnotation}=true (${why})`);
  }
  if (target?.kind === 'ambiguous') {
    return skip('AmbiguousNodeClaim', trigger, `not deleting: ${target.claims.length} NodeClaims match this node by ${target.matchedBy} (${target.claims.join(', ')}); refusing to guess (${why})`);
  }
  if (target?.kind === 'nodeclaim' && target.deleting) {
    return skip('NodeClaimDeleting', trigger, `not deleting: NodeClaim ${target.claim.name} is already being deleted (Karpenter is replacing the node) (${why})`);
  }

  // 8. Old enough.
  const created = toMillis(node.metadata?.creationTimestamp) ?? now;
  const oldEnoughAt = created + ctx.remediation.minNodeAge;
  if (now < oldEnoughAt) {
    return {
      ...skip('TooYoung', trigger, `not deleting yet: the node is ${age(now - created)} old, remediation.minNodeAge is ${formatDuration(ctx.remediation.minNodeAge)} (${why})`),
      requeueAfterMs: oldEnoughAt - now,
    };
  }

  // 9. The circuit breaker.
  const breaker = ctx.breaker();
  if (breaker.open) {
    return { kind: 'blocked', reason: 'circuit-breaker', trigger, message: `deletion paused: ${breaker.message} (${why})`, requeueAfterMs: breaker.recheckAfterMs };
  }

  // 10. In-flight and hourly limits.
  const limits = ctx.limits();
  if (!limits.ok) {
    return { kind: 'blocked', reason: limits.reason, trigger, message: `deletion held back: ${limits.message} (${why})`, requeueAfterMs: limits.retryAfterMs };
  }

  // 11. Dry run.
  if (ctx.dryRun) return { kind: 'dry-run', trigger, message: `dry run: would delete the node (${why})` };

  // 12. Delete.
  return { kind: 'delete', trigger, message: why };
}

function skip(reason: SkipReason, trigger: Trigger, message: string): Extract<Decision, { kind: 'skip' }> {
  return { kind: 'skip', reason, trigger, message };
}

// ---------------------------------------------------------------------------------------------
// Which nodes failed

/**
 * `failed`: the verification controller gave up (phase Failed). `stuck`: the node kept a
 * verification taint for stuckNodeTimeout and no worker ever got to run on it (see stuckDeadline).
 */
export function failureTrigger(
  node: V1Node,
  state: VerificationState | undefined,
  now: number,
  ctx: Pick<DecideContext, 'config' | 'remediation' | 'stuckClock'>,
): Trigger | undefined {
  // A startup timeout fails a node without a worker having blamed it: replaced only when its
  // profile says so (nodeManagement.onStartupTimeout: replace); `keep` and `open` leave it be.
  if (state?.phase === Phase.Failed) return state.lastOutcome === Outcome.StartupTimeout && ctx.config.nodeManagement.onStartupTimeout !== 'replace' ? undefined : 'failed';
  const at = stuckDeadline(node, state, ctx);
  return at !== undefined && now >= at ? 'stuck' : undefined;
}

/**
 * When a node that is not (yet) failed would count as stuck, or undefined if it never will in its
 * current state. Stuck means: remediation.stuckNodeTimeout is on; the node carries a verification
 * taint, is not verified and never was; and no attempt is in flight or due soon: no progress at
 * all (the controller could never launch a worker: pod creation refused, the node never became
 * able to run it), or a Backoff whose next attempt is more than STUCK_BACKOFF_GRACE_MS overdue
 * (launches keep failing). The clock starts at node creation, or when this controller started
 * leading if later, and stops while the node waits its turn for a verification slot (StuckClock):
 * neither a change of leader nor a long queue makes a node deletable.
 * A node whose latest attempt was inconclusive (a cluster-wide fault) is never stuck.
 * A node in phase Verifying has a worker whose own deadlines (worker.scheduleTimeout, startTimeout,
 * timeout) end the attempt; once retries are exhausted it becomes Failed, which step 3 handles.
 */
export function stuckDeadline(
  node: V1Node,
  state: VerificationState | undefined,
  ctx: Pick<DecideContext, 'config' | 'remediation' | 'stuckClock'>,
): number | undefined {
  const timeout = ctx.remediation.stuckNodeTimeout;
  if (timeout <= 0) return undefined;
  if (!hasVerificationTaint(node, ctx.config) || isVerified(node, ctx.config)) return undefined;
  // A node the worker cannot run on (Windows) is a configuration error, not a broken node: its
  // replacement would be the same.
  if (unsupportedOS(node) !== undefined) return undefined;
  if (state && (state.phase === Phase.Verifying || state.phase === Phase.Passed || state.phase === Phase.Failed)) return undefined;
  if (state?.verifiedAt !== undefined) return undefined;
  // Its worker ran, and the cluster is at fault (a DNS Service without endpoints, the API refusing):
  // a replacement would fail the same way. It waits, with the cluster-wide signal raised.
  if (state?.lastOutcome === Outcome.ClusterWide) return undefined;
  const created = toMillis(node.metadata?.creationTimestamp);
  if (created === undefined) return undefined;
  const clock = ctx.stuckClock;
  if (clock?.waiting(nodeName(node))) return undefined;
  const deadline = Math.max(created, clock?.leadingSince ?? created) + timeout + (clock?.queuedMs(nodeName(node)) ?? 0);
  // Backing off: not stuck while its next attempt is due or only just overdue.
  if (state?.phase === Phase.Backoff && state.nextAttemptAt !== undefined) return Math.max(deadline, state.nextAttemptAt + STUCK_BACKOFF_GRACE_MS);
  return deadline;
}

/** A Backoff whose next attempt is this late means launches keep failing (not just a busy queue). */
export const STUCK_BACKOFF_GRACE_MS = 5 * 60_000;

/** One line on why the node is a candidate, for Events and logs. */
function triggerMessage(trigger: Trigger, node: V1Node, state: VerificationState | undefined, now: number, ctx: Pick<DecideContext, 'remediation'>): string {
  if (trigger === 'failed') {
    const outcome = state?.lastOutcome ? `${state.lastOutcome}: ` : '';
    const attempts = state ? `, ${state.failures} failed attempt${state.failures === 1 ? '' : 's'}` : '';
    return `verification failed${attempts}; last: ${outcome}${state?.lastMessage ?? 'no message'}`;
  }
  const created = toMillis(node.metadata?.creationTimestamp) ?? now;
  return `stuck: the node kept its verification taint for ${age(now - created)} without a worker ever running on it (remediation.stuckNodeTimeout ${formatDuration(ctx.remediation.stuckNodeTimeout)})`;
}

/** An age for messages, in whole seconds ("1h1m", not "1h1m0.173s"). */
function age(ms: number): string {
  return formatDuration(Math.max(0, Math.floor(ms / 1000) * 1000));
}

export function doNotDisrupt(obj: { metadata?: { annotations?: Record<string, string> } }): boolean {
  return annotation(obj, KarpenterApi.DoNotDisruptAnnotation) === 'true';
}

/** The NodePool a node belongs to ("" for nodes Karpenter does not manage: one group). */
export function nodePoolOf(node: V1Node): string {
  return label(node, KarpenterApi.NodePoolLabel) ?? '';
}

/**
 * Failed or stuck (for the NodePool share of the circuit breaker and for counting deletions in
 * flight), whatever the other guards say.
 */
export function isFailedNode(node: V1Node, now: number, ctx: Pick<DecideContext, 'config' | 'remediation' | 'readState' | 'stuckClock'>): boolean {
  const read = ctx.readState(node);
  return failureTrigger(node, read.kind === 'ok' ? read.state : undefined, now, ctx) !== undefined;
}

/**
 * The longest a verification can take before the node is marked Failed: every attempt running into
 * its last deadline, plus every backoff. stuckNodeTimeout below this could delete a node the
 * verification controller is still working on (the remediator warns at start-up).
 */
export function longestVerificationMs(config: ControllerConfig): number {
  const { worker, reconciliation } = config;
  const attempt = worker.scheduleTimeout + worker.startTimeout + worker.timeout + RUN_GRACE_MS;
  let total = (1 + reconciliation.maxRetries) * attempt;
  for (let failures = 1; failures <= reconciliation.maxRetries; failures++) total += backoffDelay(failures, reconciliation);
  return total;
}
