import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { isRefusal, messageOf, reasonOf } from '../../../../kube/errors.js';
import { nodeName } from '../../../../kube/objects.js';
import { podRef, POD_REFUSED_RETRY_MS, type Action } from '../decide.js';
import { podRefusedEvent, startedEvent } from '../events.js';
import { buildWorkerPod } from '../pod-spec.js';
import { CONFLICT, requeue, type ActionContext, type Applied } from './context.js';

/**
 * Launch: the worker pod first (its deterministic name makes a repeat, after a crash or a
 * conflict, a no-op), then the progress that says the attempt runs. The slot was reserved by the
 * controller before any await.
 */
export async function launch(ctx: ActionContext, node: V1Node, action: Extract<Action, { kind: 'Launch' }>, log: Logger): Promise<Applied> {
  const { config, kube, worker } = ctx.deps;
  const name = nodeName(node);
  const checks = worker.configs.of(ctx.profile);
  const pod = buildWorkerPod({
    node,
    attempt: action.attempt,
    podName: action.podName,
    config,
    image: worker.image,
    configKey: checks.key,
    configHash: checks.hash,
    containerChecks: config.worker.containerChecks,
    apiEndpoints: worker.apiEndpoints?.() ?? [],
  });
  let created: V1Pod | undefined;
  try {
    created = await kube.createPod(pod);
  } catch (err) {
    if (!isRefusal(err)) throw err;
    ctx.deps.reactions?.cancel('launch', name);
    podRefused(ctx, node, action.podName, err, log);
    return { kind: 'done', node, result: requeue(POD_REFUSED_RETRY_MS) };
  }
  ctx.deps.reactions?.stop('launch', name);

  // Refused, the decision was made on a stale copy: the controller decides again on a live one,
  // and keeps the pod only if that decision follows it.
  const saved = await ctx.deps.store.save(node, action.state);
  if (saved === 'conflict') return created ? { kind: 'conflict', launched: podRef(created) } : CONFLICT;

  ctx.emit(name, startedEvent(action, config));
  if (action.state.failures > 0) ctx.deps.metrics.recordRetry(name);
  log.info({ attempt: action.attempt, pod: action.podName, existed: created === undefined }, 'started worker pod');
  return { kind: 'done', node: saved, state: action.state, result: requeue(action.requeueAfterMs) };
}

/**
 * The API server refused the worker pod (admission, quota, Pod Security): no pod, so the slot goes
 * back at once; the node's progress is untouched (not an attempt: the node is not at fault); it
 * tries again in POD_REFUSED_RETRY_MS. Said once per node and message; counted for the breaker.
 */
function podRefused(ctx: ActionContext, node: V1Node, podName: string, err: unknown, log: Logger): void {
  const name = nodeName(node);
  const message = messageOf(err);
  ctx.deps.slots.release(name);
  ctx.slotFreed();
  ctx.deps.metrics.recordPodRefused(reasonOf(err) ?? 'Unknown');
  ctx.deps.podRefused?.(node);
  const memo = ctx.memory.of(name);
  if (memo.refusedReported === message) return;
  memo.refusedReported = message;
  ctx.emit(name, podRefusedEvent(podName, message));
  log.warn({ pod: podName, err: message, retryAfterMs: POD_REFUSED_RETRY_MS }, 'the API server refused the worker pod; not counted as an attempt, tried again later');
}
