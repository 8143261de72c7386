import type { V1Node } from '@kubernetes/client-node';
import type { ControllerConfig } from '../../../config/schema.js';
import { nodeTaints, toMillis } from '../../../kube/objects.js';
import { isVerificationTaint } from './decide.js';
import { formatTaint } from './taints.js';
import { Outcome, Phase, type VerificationState } from './types.js';

/**
 * The Node writes of a verification, as RFC 6902 JSON patches computed from the node the decision
 * was made on and guarded by `test` operations on exactly what the decision relied on:
 *
 *   - the node UID (the object was not deleted and re-created under the same name);
 *   - each taint we remove, at its index (key and effect), removed from the highest index down;
 *   - the absence of the labels map or taints list the patch creates (it would replace one made
 *     meanwhile). Absence is tested with `"value": null`: kube-apiserver applies JSON patches with
 *     evanphx/json-patch, whose `test` of null passes when the target is missing.
 *
 * Progress is not on the Node (NodeVerification status: store.ts), so a node is written only when
 * it opens (our taints off, the verified label on) or its failed taint comes or goes: a patch of
 * tests alone is not sent. A failed test makes the API server refuse the whole patch (HTTP 422), the
 * executor re-reads the node live and decides again. Fields other writers own (their taints, labels,
 * annotations, status) are never in the patch, so a concurrent kubelet status update or label change
 * is no conflict and is never overwritten.
 */
export type JsonPatchOp =
  | { op: 'test'; path: string; value: unknown }
  | { op: 'add'; path: string; value: unknown }
  | { op: 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

export interface NodePatchInput {
  node: V1Node;
  config: ControllerConfig;
  /** The progress being stored (its phase says whether the node is failed). */
  state: VerificationState;
  /** The node passed: remove our taints, add the verified label. A startup timeout's `open` (failOpen below): remove our taints only. */
  open: boolean;
}

export function nodePatch({ node, config, state, open }: NodePatchInput): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/uid', value: node.metadata?.uid ?? '' }];
  const failedTaint = config.nodeManagement.failedTaint;
  const isFailedTaint = (t: { key: string; effect: string }) => failedTaint.enabled && t.key === failedTaint.key && t.effect === 'NoSchedule';
  const failed = state.phase === Phase.Failed;
  // A startup timeout with onStartupTimeout: open fails the node open: our taints go (with `open`),
  // and it gets neither the verified label nor the failed taint: it is open, and not verified.
  const failOpen = failed && state.lastOutcome === Outcome.StartupTimeout && config.nodeManagement.onStartupTimeout === 'open';

  // Our taints to remove, each tested at its index and removed from the highest index down: the
  // verification taints when the node opens, the failed taint whenever the node is not failed.
  const taints = nodeTaints(node);
  const remove = taints.map((t, i) => ({ t, i })).filter(({ t }) => (open && isVerificationTaint(t, config)) || (!failed && isFailedTaint(t)));
  for (const { t, i } of remove) {
    ops.push({ op: 'test', path: `/spec/taints/${i}/key`, value: t.key }, { op: 'test', path: `/spec/taints/${i}/effect`, value: t.effect });
  }
  for (const { i } of [...remove].reverse()) ops.push({ op: 'remove', path: `/spec/taints/${i}` });

  // Failed: the failed taint, appended (another writer's taints may move; the end stays the end).
  if (failed && !failOpen && failedTaint.enabled && !taints.some(isFailedTaint)) {
    const taint = { key: failedTaint.key, value: 'true', effect: 'NoSchedule' };
    if (node.spec?.taints === undefined) ops.push({ op: 'test', path: '/spec/taints', value: null }, { op: 'add', path: '/spec/taints', value: [taint] });
    else ops.push({ op: 'add', path: '/spec/taints/-', value: taint });
  }

  if (open && !failOpen) {
    const { key, value } = config.nodeManagement.verifiedLabel;
    if (node.metadata?.labels === undefined) ops.push({ op: 'test', path: '/metadata/labels', value: null });
    ops.push(...setMapEntries(node.metadata?.labels, '/metadata/labels', { [key]: value }));
  }
  return ops;
}

/** The taints a successful verification removes (for logs and events). */
export function taintsToRemove(node: V1Node, config: ControllerConfig): string[] {
  return nodeTaints(node)
    .filter((t) => isVerificationTaint(t, config))
    .map(formatTaint);
}

/** Sets (or, for null, removes) entries of a string map, creating the map if the object has none. */
function setMapEntries(current: Record<string, string> | undefined, path: string, entries: Record<string, string | null>): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  if (current === undefined) {
    const created = Object.fromEntries(Object.entries(entries).filter((e): e is [string, string] => e[1] !== null));
    return Object.keys(created).length > 0 ? [{ op: 'add', path, value: created }] : [];
  }
  for (const [key, value] of Object.entries(entries)) {
    const entryPath = `${path}/${escapePointer(key)}`;
    if (value === null) {
      if (key in current) ops.push({ op: 'remove', path: entryPath });
    } else if (current[key] !== value) {
      ops.push({ op: 'add', path: entryPath, value });
    }
  }
  return ops;
}

/** RFC 6901: "~" -> "~0", "/" -> "~1". */
export function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

// ---------------------------------------------------------------------------------------------
// The node condition (status subresource)

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
}

/**
 * A strategic-merge patch for nodes/status that sets our one condition. Conditions merge by
 * `type`, so the kubelet's conditions (and anyone else's) are untouched. lastTransitionTime only
 * moves when the status changes. Undefined when the node already says exactly this.
 */
export interface ConditionPatch {
  status: { conditions: Array<ConditionInput & { lastHeartbeatTime: string; lastTransitionTime: string }> };
}

export function conditionPatch(node: V1Node, wanted: ConditionInput, now: number): ConditionPatch | undefined {
  const existing = node.status?.conditions?.find((c) => c.type === wanted.type);
  if (existing && existing.status === wanted.status && existing.reason === wanted.reason && existing.message === wanted.message) {
    return undefined;
  }
  const nowIso = new Date(now).toISOString();
  const transition = existing && existing.status === wanted.status ? (toMillis(existing.lastTransitionTime) ?? now) : now;
  return {
    status: {
      conditions: [
        {
          type: wanted.type,
          status: wanted.status,
          reason: wanted.reason,
          message: wanted.message,
          lastHeartbeatTime: nowIso,
          lastTransitionTime: new Date(transition).toISOString(),
        },
      ],
    },
  };
}
