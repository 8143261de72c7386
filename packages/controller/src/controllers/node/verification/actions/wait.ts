import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { nodeName, nodeUid, toMillis } from '../../../../kube/objects.js';
import { gatesCondition, unsupportedOSCondition, waitingCondition } from '../condition.js';
import { carried, unsupportedOS, type Action } from '../decide.js';
import { awaitingRegistrationEvent, unsupportedOSEvent, waitingForGatesEvent, waitingForNodeEvent } from '../events.js';
import type { ConditionInput } from '../node-patch.js';
import { Phase, type VerificationState } from '../types.js';
import { CONFLICT, requeue, type ActionContext, type Applied } from './context.js';

/** How long a node may wait to become launchable before the wait is reported (condition, Event). */
export const WAITING_REPORT_AFTER_MS = 10_000;

/**
 * Wait: nothing to start or record now. An attempt whose worker pod is newer than the stored
 * progress (created before a restart or a leader change) is followed from memory, not written; a
 * node that waits to become launchable or forever (not Linux) has its wait recorded and reported;
 * a wait for a slot is said by the metrics only.
 */
export async function wait(ctx: ActionContext, node: V1Node, action: Extract<Action, { kind: 'Wait' }>, state: VerificationState | undefined, log: Logger): Promise<Applied> {
  const { config, metrics } = ctx.deps;
  const name = nodeName(node);
  if (action.adopt) {
    ctx.deps.store.follow(action.adopt, name);
    log.info({ attempt: action.attempt }, 'following an attempt whose worker pod already existed');
  }
  log.debug({ reason: action.reason, attempt: action.attempt, requeueAfterMs: action.requeueAfterMs, waitingFor: action.waitingFor }, 'waiting');
  switch (action.reason) {
    case 'ConcurrencyLimit':
      // The controller's own pacing, not the node's: said by the metrics
      // (kube_node_ready_active_verifications at its limit, this node waiting), not written.
      metrics.setNodeStatus(name, 'waiting');
      break;
    case 'KarpenterRegistration':
      ctx.emit(name, awaitingRegistrationEvent());
      break;
    case 'UnsupportedOS': {
      const os = unsupportedOS(node) ?? 'unknown';
      if (tellOnce(ctx, name, `${nodeUid(node)}|os`)) {
        ctx.emit(name, unsupportedOSEvent(os, config));
        log.warn({ os }, 'the worker cannot run on this node (not Linux); it is not verified and keeps its taint');
      }
      const condition = unsupportedOSCondition(os, config);
      if ((await recordWaiting(ctx, node, state, condition)) === 'conflict') return CONFLICT;
      return { kind: 'done', node, report: { status: 'waiting', condition }, result: {} };
    }
    case 'GatesPending':
      return action.attempt !== undefined ? gatesAfterPass(ctx, node, action, action.attempt, state, log) : beforeAttempt(ctx, node, action, state, log);
    case 'NodeNotLaunchable':
      return beforeAttempt(ctx, node, action, state, log);
    default:
      break;
  }
  return { kind: 'done', node, ...(action.adopt ? { state: action.adopt } : {}), result: requeue(action.requeueAfterMs) };
}

/**
 * The attempt passed; the node opens once its readiness gates hold. Its NodeVerification says so
 * (written only when what they wait for changes), and an Event, once per attempt.
 */
async function gatesAfterPass(ctx: ActionContext, node: V1Node, action: Extract<Action, { kind: 'Wait' }>, attempt: number, state: VerificationState | undefined, log: Logger): Promise<Applied> {
  const name = nodeName(node);
  const waitingFor = action.waitingFor ?? [];
  const condition = gatesCondition(waitingFor, false, ctx.deps.config, attempt);
  const progress = action.adopt ?? state;
  const saved = progress ? await ctx.deps.store.save(node, progress, { condition }) : node;
  if (saved === 'conflict') return CONFLICT;
  if (tellOnce(ctx, name, `${nodeUid(node)}|gates|${attempt}`)) {
    ctx.emit(name, waitingForGatesEvent(waitingFor, false, ctx.deps.config, attempt));
    log.info({ attempt, waitingFor }, 'the attempt passed; waiting for the readiness gates before opening the node');
  }
  return { kind: 'done', node: saved, report: { status: 'verifying', condition }, result: requeue(action.requeueAfterMs) };
}

/**
 * Before any attempt, the node cannot run the worker yet (NodeNotLaunchable) or its readiness gates
 * do not hold (GatesPending): the wait is recorded and, once it has lasted WAITING_REPORT_AFTER_MS,
 * reported (condition, an Event once per kind of wait and once more when overdue). A new node
 * waiting only for its own Ready (its kubelet and CNI coming up: every node does, often for a
 * minute on a cloud) is said by the status metric alone until it is overdue (ADR 0006).
 */
async function beforeAttempt(ctx: ActionContext, node: V1Node, action: Extract<Action, { kind: 'Wait' }>, state: VerificationState | undefined, log: Logger): Promise<Applied> {
  const { config, metrics } = ctx.deps;
  const name = nodeName(node);
  const waitingFor = action.waitingFor ?? [];
  const overdue = action.overdue ?? false;
  const gates = action.reason === 'GatesPending';
  if (action.bootingOnly && !overdue && state === undefined) {
    metrics.setNodeStatus(name, 'waiting');
    return { kind: 'done', node, result: requeue(action.requeueAfterMs) };
  }
  // A node that has just registered is usually Ready within seconds: say nothing (no Event, nothing
  // written) until it has waited WAITING_REPORT_AFTER_MS. The status metric costs no request and
  // says it at once.
  const age = ctx.deps.clock.now() - (toMillis(node.metadata?.creationTimestamp) ?? 0);
  const condition = gates ? gatesCondition(waitingFor, overdue, config) : waitingCondition(waitingFor, overdue, config);
  if ((await recordWaiting(ctx, node, state, condition)) === 'conflict') return CONFLICT;
  if (age < WAITING_REPORT_AFTER_MS) {
    metrics.setNodeStatus(name, 'waiting');
    const again = WAITING_REPORT_AFTER_MS - age;
    return { kind: 'done', node, result: requeue(Math.min(again, action.requeueAfterMs ?? again)) };
  }
  if (tellOnce(ctx, name, `${nodeUid(node)}|${action.reason}|${overdue}`)) {
    ctx.emit(name, gates ? waitingForGatesEvent(waitingFor, overdue, config) : waitingForNodeEvent(waitingFor, overdue, config));
    const says = gates
      ? overdue
        ? 'the readiness gates still do not hold after nodeManagement.bringUpTimeout'
        : 'waiting for the readiness gates before the first attempt'
      : overdue
        ? 'the node still cannot run the worker after nodeManagement.bringUpTimeout'
        : 'waiting until the node can run the worker';
    (overdue ? log.warn.bind(log) : log.info.bind(log))({ waitingFor }, says);
  }
  return { kind: 'done', node, report: { status: 'waiting', condition }, result: requeue(action.requeueAfterMs) };
}

/** Whether the node is told of this wait now (`key` differs from what it was last told). */
function tellOnce(ctx: ActionContext, name: string, key: string): boolean {
  const memo = ctx.memory.of(name);
  if (memo.waitingReported === key) return false;
  memo.waitingReported = key;
  return true;
}

/**
 * A node to verify waits (it cannot run the worker yet, its gates do not hold, or it never can): a
 * wait longer than WAITING_REPORT_AFTER_MS is recorded in its NodeVerification (phase Waiting, with
 * what it waits for; the first record creates it). A node with an attempt behind it keeps that
 * phase (its backoff has run out).
 */
async function recordWaiting(ctx: ActionContext, node: V1Node, state: VerificationState | undefined, condition: ConditionInput): Promise<V1Node | 'conflict'> {
  if (state && state.phase !== Phase.Waiting) return node;
  const age = ctx.deps.clock.now() - (toMillis(node.metadata?.creationTimestamp) ?? 0);
  if (age < WAITING_REPORT_AFTER_MS) return node;
  const waiting: VerificationState = { ...carried(state, nodeUid(node)), phase: Phase.Waiting };
  const launchable = ctx.memory.get(nodeName(node))?.launchableSince;
  if (launchable !== undefined) waiting.launchableAt = launchable;
  return ctx.deps.store.save(node, waiting, { condition });
}
