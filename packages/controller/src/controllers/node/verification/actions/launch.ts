import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { isRefusal, messageOf, reasonOf } from '../../../../kube/errors.js';
import { nodeName } from '../../../../kube/objects.js';
import { POD_REFUSED_RETRY_MS, type Action } from '../decide.js';
import { podRefusedEvent } from '../events.js';
import { buildWorkerPod } from '../pod-spec.js';
import { requeue, type ActionContext, type Applied } from './context.js';

/**
 * Launch: the worker pod, and nothing else. Its deterministic name (node, node UID, attempt) makes a
 * repeat a no-op and makes the pod the record of the attempt in flight: a restarted controller, or
 * a new leader, finds it and follows it (decide() step 5), so the attempt's progress is written
 * only with its outcome, and no Event is recorded for a start (the pod's own say when it was
 * scheduled and started). The slot was reserved by the controller before any await.
 */
export async function launch(ctx: ActionContext, node: V1Node, action: Extract<Action, { kind: 'Launch' }>, log: Logger): Promise<Applied> {
  const { config, kube, worker } = ctx.deps;
  const name = nodeName(node);
  // Another installation's node gets no worker (nothing else is written here to refuse it).
  ctx.deps.store.assertOurs(node);
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
  ctx.deps.store.follow(action.state, name);
  if (action.state.failures > 0) ctx.deps.metrics.recordRetry(name);
  if (created) log.info({ attempt: action.attempt, pod: action.podName }, 'started worker pod');
  else log.info({ attempt: action.attempt, pod: action.podName }, 'following the worker pod of this attempt, which already existed');
  return { kind: 'done', node, state: action.state, result: requeue(action.requeueAfterMs) };
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
