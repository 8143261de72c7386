import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import { EventType } from '../../../events/reasons.js';
import { messageOf } from '../../../kube/errors.js';
import { label, nodeName, nodeUid } from '../../../kube/objects.js';
import type { Decision, Trigger } from './decide.js';
import type { RemediationEvents } from './events.js';
import type { NodeClaimRef, Target } from './executor.js';
import type { RemediationMetrics } from './metrics.js';
import { BlockReason, KarpenterApi, RemediationReason, type RemediationAction, type RemediationResult } from './names.js';
import type { InFlight } from './rate-limit.js';
import type { ConsiderResult, ConsiderDecision } from './remediator.js';

/**
 * How remediation reports: every decision other than "not a failed node" gets an Event on the Node
 * (and on its NodeClaim), a count in kube_node_ready_remediations_total{action,result} and a log
 * line, once per node and decision: a decision repeated on the next look is not reported again.
 * Deletions and errors are reported every time they happen. The block gauges
 * (kube_node_ready_remediation_blocked{reason}) are set from the state the remediator passes, with
 * a log line when the circuit breaker opens or closes.
 */

/** Retry after an API error. */
export const ERROR_RETRY_MS = 30_000;

export interface ReporterOptions {
  clock: Clock;
  /** The remediation controller's logger (breaker and stalled lines); decisions log through the node's child logger. */
  log: Logger;
  events: RemediationEvents;
  metrics: RemediationMetrics;
}

interface Report {
  key: string;
  action: RemediationAction;
  result: RemediationResult;
  type: EventType;
  reason: RemediationReason;
  message: string;
  decision: ConsiderDecision;
  target?: Target;
  log: Logger;
  level?: 'info' | 'warn' | 'error';
  /** Reported even when it repeats the last report for the node. */
  always?: boolean;
}

export class Reporter {
  /** Node UID -> the decision last reported, so repeats are not reported again. */
  private readonly reported = new Map<string, string>();
  private breakerWasOpen = false;

  constructor(private readonly opts: ReporterOptions) {}

  /** The node is gone: its next decision (should its UID come back) is reported afresh. */
  forget(uid: string): void {
    this.reported.delete(uid);
  }

  /** A guard keeps the node (skip), or a block holds its deletion (blocked). */
  async heldBack(node: V1Node, decision: Extract<Decision, { kind: 'skip' | 'blocked' }>, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    const key = `${decision.kind}:${decision.reason}`;
    const requeue = decision.requeueAfterMs !== undefined ? { requeueAfterMs: decision.requeueAfterMs } : {};
    if (this.reported.get(nodeUid(node)) === key) return { decision, result: 'skipped', ...requeue, reported: false };
    const result = await this.report(node, {
      key,
      action: target ? actionOf(target) : guessAction(node),
      result: 'skipped',
      type: decision.kind === 'blocked' || decision.reason === 'AmbiguousNodeClaim' ? EventType.Warning : EventType.Normal,
      reason: decision.kind === 'blocked' ? RemediationReason.Blocked : RemediationReason.Skipped,
      message: decision.message,
      decision,
      ...(target ? { target } : {}),
      log,
      level: decision.kind === 'blocked' || decision.reason === 'AmbiguousNodeClaim' ? 'warn' : 'info',
    });
    return { ...result, ...requeue };
  }

  /** What would be deleted. */
  async dryRun(node: V1Node, decision: Extract<Decision, { kind: 'dry-run' }>, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    if (this.reported.get(nodeUid(node)) === 'dry-run') return { decision, result: 'dry-run', reported: false };
    const what = !target
      ? 'its NodeClaim, or the Node'
      : target.kind === 'nodeclaim'
        ? `NodeClaim ${target.claim.name} (matched by ${target.matchedBy})`
        : target.kind === 'node'
          ? `the Node object (${target.why === 'api-not-served' ? 'NodeClaim API not served' : 'no NodeClaim'}; the machine may keep running)`
          : `nothing (${target.claims.length} NodeClaims match: ambiguous)`;
    return this.report(node, {
      key: 'dry-run',
      action: target ? actionOf(target) : guessAction(node),
      result: 'dry-run',
      type: EventType.Normal,
      reason: RemediationReason.DryRun,
      message: decision.message.replace(/^dry run: would delete the node/, `dry run: would delete ${what}`),
      decision,
      ...(target ? { target } : {}),
      log,
      level: 'info',
    });
  }

  /** The lookup or the delete failed: looked at again after ERROR_RETRY_MS. */
  async error(node: V1Node, trigger: Trigger, err: unknown, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    const message = `remediation failed, retrying in ${formatDuration(ERROR_RETRY_MS)}: ${messageOf(err)}`;
    const result = await this.report(node, {
      key: 'error',
      action: target && target.kind !== 'ambiguous' ? actionOf(target) : guessAction(node),
      result: 'error',
      type: EventType.Warning,
      reason: RemediationReason.Failed,
      message,
      decision: { kind: 'delete', trigger, message },
      log,
      level: 'error',
      always: true,
    });
    return { ...result, requeueAfterMs: ERROR_RETRY_MS };
  }

  /** The NodeClaim, or the Node, was deleted. */
  deleted(node: V1Node, decision: Extract<Decision, { kind: 'delete' }>, target: Extract<Target, { kind: 'nodeclaim' | 'node' }>, log: Logger): Promise<ConsiderResult> {
    const message =
      target.kind === 'nodeclaim'
        ? `deleted NodeClaim ${target.claim.name} (matched by ${target.matchedBy}): Karpenter drains the node and terminates its instance; ${decision.message}`
        : `deleted the Node object (${target.why === 'api-not-served' ? `the ${KarpenterApi.Group}/${KarpenterApi.Version} NodeClaim API is not served` : 'no NodeClaim matches this node'}): the machine itself may keep running, and be billed, unless an autoscaler or cloud controller removes it; ${decision.message}`;
    return this.report(node, {
      key: 'deleted',
      action: actionOf(target),
      result: 'deleted',
      type: target.kind === 'nodeclaim' ? EventType.Normal : EventType.Warning,
      reason: target.kind === 'nodeclaim' ? RemediationReason.NodeClaimDeleted : RemediationReason.NodeDeleted,
      message,
      decision,
      target,
      log,
      level: 'info',
      always: true,
    });
  }

  /** A deletion issued inFlightTimeout ago whose node still exists. */
  async stalled(stalled: InFlight): Promise<void> {
    const message = `${stalled.target} was deleted ${formatDuration(this.opts.clock.now() - stalled.at)} ago and the node still exists; it no longer counts as in flight (remediation.inFlightTimeout), and it will not be deleted again`;
    this.opts.log.warn({ node: stalled.node, target: stalled.target }, message);
    await this.opts.events.node(stalled.node, EventType.Warning, RemediationReason.Stalled, message);
  }

  /** Sets kube_node_ready_remediation_blocked{reason}; logs when the breaker opens (with `breakerReasons`) or closes. */
  blocked(values: Record<BlockReason, boolean>, breakerReasons: readonly string[]): void {
    const open = values['circuit-breaker'];
    if (open !== this.breakerWasOpen) {
      this.breakerWasOpen = open;
      if (open) this.opts.log.warn({ reasons: breakerReasons }, 'remediation paused: circuit breaker open; no failed node is deleted until failures drop');
      else this.opts.log.info('remediation resumed: circuit breaker closed');
    }
    for (const reason of BlockReason) this.opts.metrics.remediationBlocked.set({ reason }, values[reason] ? 1 : 0);
  }

  private async report(node: V1Node, r: Report): Promise<ConsiderResult> {
    const uid = nodeUid(node);
    const out: ConsiderResult = { decision: r.decision, action: r.action, result: r.result, ...(r.target ? { target: r.target } : {}), reported: false };
    if (!r.always && this.reported.get(uid) === r.key) return out;
    this.reported.set(uid, r.key);
    this.opts.metrics.remediationsTotal.inc({ action: r.action, result: r.result });
    r.log[r.level ?? 'info']({ action: r.action, result: r.result, reason: r.reason, ...(r.target?.kind === 'nodeclaim' ? { nodeClaim: r.target.claim.name } : {}) }, r.message);
    await this.opts.events.node(nodeName(node), r.type, r.reason, r.message);
    const claim: NodeClaimRef | undefined = r.target?.kind === 'nodeclaim' ? r.target.claim : undefined;
    if (claim) await this.opts.events.nodeClaim(claim, r.type, r.reason, `node ${nodeName(node)}: ${r.message}`);
    return { ...out, reported: true };
  }
}

function actionOf(target: Target): RemediationAction {
  return target.kind === 'node' ? 'delete-node' : 'delete-nodeclaim';
}

/** When the lookup failed: a node Karpenter manages would have its NodeClaim deleted. */
function guessAction(node: V1Node): RemediationAction {
  const owned = (node.metadata?.ownerReferences ?? []).some((o) => o.kind === KarpenterApi.NodeClaimKind);
  return owned || label(node, KarpenterApi.NodePoolLabel) !== undefined ? 'delete-nodeclaim' : 'delete-node';
}
