import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { nodeName } from '../../../../kube/objects.js';
import type { Action } from '../decide.js';
import { Phase, type VerificationState } from '../types.js';
import { CONFLICT, type ActionContext, type Applied } from './context.js';

/**
 * Ignore: nothing to verify (the node is going away, verified, not ours to verify, or failed for
 * good). Its slot and place in line go; a node found open while its attempt is still recorded as
 * running (the reconcile ended between opening it and storing the pass) has the pass recorded.
 */
export async function ignore(ctx: ActionContext, node: V1Node, action: Extract<Action, { kind: 'Ignore' }>, state: VerificationState | undefined, log: Logger): Promise<Applied> {
  const name = nodeName(node);
  ctx.deps.slots.release(name);
  if (action.reason === 'NodeDeleting' || action.reason === 'NotCandidate') ctx.deps.metrics.forgetNode(name);
  const inFlight = action.adopt ?? (state?.phase === Phase.Verifying ? state : undefined);
  if (action.reason === 'Verified' && inFlight) {
    const completed: VerificationState = { ...inFlight, phase: Phase.Passed, failures: 0, verifiedAt: inFlight.verifiedAt ?? ctx.deps.clock.now() };
    delete completed.failing;
    const saved = await ctx.deps.store.save(node, completed);
    if (saved === 'conflict') return CONFLICT;
    log.info({ attempt: inFlight.attempt }, 'node found open with its attempt still recorded as running: recorded it as passed');
    return { kind: 'done', node: saved, state: completed, result: {} };
  }
  log.trace({ reason: action.reason }, 'nothing to do');
  return { kind: 'done', node, result: {} };
}
