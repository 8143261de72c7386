import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { nodeName, toMillis } from '../../../../kube/objects.js';
import { recordVerdict } from '../cluster-wide.js';
import type { Action } from '../decide.js';
import { completedEvents } from '../events.js';
import { taintsToRemove } from '../node-patch.js';
import { Outcome } from '../types.js';
import { storeOutcome } from '../open.js';
import { CONFLICT, requeue, type ActionContext, type Applied } from './context.js';

/**
 * Complete: a finished attempt, as decide() judged it. A pass opens the node first (open.ts), then
 * the outcome is stored; then it is explained (Events, logs, metrics), recorded for the
 * cluster-wide rule, and the attempt's pod goes (failed ones are kept up to worker.keepFailedPods).
 */
export async function complete(ctx: ActionContext, node: V1Node, pods: readonly V1Pod[], action: Extract<Action, { kind: 'Complete' }>, log: Logger): Promise<Applied> {
  const { config, clock, metrics, store, kube } = ctx.deps;
  const name = nodeName(node);
  const removedTaints = action.open ? taintsToRemove(node, config) : [];

  // 1. Write: open the node (a pass), then store the outcome. Another installation's node is
  //    refused before either.
  const saved = await storeOutcome({ kube, store, config }, node, action.state, action.open);
  if (saved === 'conflict') return CONFLICT;
  const now = clock.now();
  const passed = action.result.outcome === Outcome.Passed;
  // Opened because it passed (a startup timeout's `open` removes the taints too, unverified: not a verification's latency).
  const openedNow = passed && action.open && !config.dryRun && removedTaints.length > 0;
  if (openedNow) ctx.deps.reactions?.stop('open', name);
  else ctx.deps.reactions?.cancel('open', name);

  // 2. Record it for the cluster-wide rule: passes, and the signal raised or cleared.
  if (ctx.deps.clusterWide) {
    const signal = recordVerdict(ctx.deps.clusterWide, name, action);
    for (const { check, why } of signal.raised) log.warn({ check, why }, 'cluster-wide fault: attempts failing this check are inconclusive until a node passes it');
    for (const check of signal.cleared) log.info({ check }, 'cluster-wide fault cleared: a node passed the check');
  }

  // 3. Explain: events, logs, metrics.
  for (const event of completedEvents(action, config, { dryRun: config.dryRun, removedTaints })) ctx.emit(name, event);
  const pod = pods.find((p) => p.metadata?.name === action.pod?.name);
  const podCreated = toMillis(pod?.metadata?.creationTimestamp);
  const finished = action.result.finishedAt ?? now;
  metrics.recordAttempt({
    profile: ctx.profile,
    outcome: action.result.outcome,
    ...(podCreated !== undefined ? { durationSeconds: (finished - podCreated) / 1000 } : {}),
    checks: action.result.checks,
    warnings: action.result.warnings,
  });
  const created = toMillis(node.metadata?.creationTimestamp);
  if (openedNow && created !== undefined) metrics.recordOpened((now - created) / 1000, ctx.profile);
  const warnings = action.result.warnings.map((w) => w.message);
  const fields = { attempt: action.attempt, outcome: action.result.outcome, failedChecks: action.result.failedChecks, phase: action.state.phase, ...(warnings.length > 0 ? { warnings } : {}) };
  if (action.result.outcome === Outcome.StartupTimeout) log.warn({ ...fields, message: action.result.message, onStartupTimeout: config.nodeManagement.onStartupTimeout, removedTaints }, 'no verdict within the startup timeout');
  else if (passed) log.info({ ...fields, removedTaints, dryRun: config.dryRun }, config.dryRun ? 'node passed (dry run: not opened)' : 'node passed and was opened');
  else log.warn({ ...fields, message: action.result.message, requeueAfterMs: action.requeueAfterMs }, 'verification attempt failed');

  // 4. The pod has served its purpose.
  if (action.deletePod && action.pod) await ctx.deletePods([action.pod], log);
  ctx.deps.slots.release(name);
  return { kind: 'done', node: saved, state: action.state, result: requeue(action.requeueAfterMs) };
}
