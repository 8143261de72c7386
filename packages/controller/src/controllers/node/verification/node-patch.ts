import type { V1Node } from '@kubernetes/client-node';
import { Annotation } from '../../../api/well-known.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { annotation, nodeTaints, toMillis } from '../../../kube/objects.js';
import { isVerificationTaint } from './decide.js';
import { stateAnnotations } from './state.js';
import { formatTaint } from './taints.js';
import { Phase, type VerificationState } from './types.js';

/**
 * Node writes as RFC 6902 JSON patches, computed from the node the decision was made on and
 * guarded by `test` operations on exactly what the decision relied on:
 *
 *   - the node UID (the object was not deleted and re-created under the same name);
 *   - each of our state annotations as we read it, present or absent (no other leader, and no
 *     write of ours the informer has not delivered yet, moved the state on);
 *   - each taint we remove, at its index (key and effect), removed from the highest index down;
 *   - the absence of the labels or annotations map the patch creates (it would replace one made
 *     meanwhile).
 *
 * Absence is tested with `"value": null`: kube-apiserver applies JSON patches with
 * evanphx/json-patch, whose `test` of null passes when the target is missing and fails when it
 * holds any value (stricter RFC 6902 readers call a missing target an error). Without it, a stale
 * copy read before the first write of our progress would pass every test and overwrite newer
 * progress: a restarted attempt count, a second worker.
 *
 * A failed test makes the API server refuse the whole patch (HTTP 422), the executor re-reads the
 * node live and decides again. Fields other writers own (their taints, labels, annotations,
 * status) are never in the patch, so a concurrent kubelet status update or label change is no
 * conflict and is never overwritten.
 */
export type JsonPatchOp =
  | { op: 'test'; path: string; value: unknown }
  | { op: 'add'; path: string; value: unknown }
  | { op: 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

export interface NodePatchInput {
  node: V1Node;
  config: ControllerConfig;
  /** The progress to store. */
  state: VerificationState;
  /** The node passed: remove our taints, add the verified label. */
  open: boolean;
}

export function nodePatch({ node, config, state, open }: NodePatchInput): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [...guards(node)];
  const failedTaint = config.nodeManagement.failedTaint;
  const isFailedTaint = (t: { key: string; effect: string }) => failedTaint.enabled && t.key === failedTaint.key && t.effect === 'NoSchedule';
  const failed = state.phase === Phase.Failed;

  // Our taints to remove, each tested at its index and removed from the highest index down: the
  // verification taints when the node opens, the failed taint whenever the node is not failed.
  const taints = nodeTaints(node);
  const remove = taints.map((t, i) => ({ t, i })).filter(({ t }) => (open && isVerificationTaint(t, config)) || (!failed && isFailedTaint(t)));
  for (const { t, i } of remove) {
    ops.push({ op: 'test', path: `/spec/taints/${i}/key`, value: t.key }, { op: 'test', path: `/spec/taints/${i}/effect`, value: t.effect });
  }
  for (const { i } of [...remove].reverse()) ops.push({ op: 'remove', path: `/spec/taints/${i}` });

  // Failed: the failed taint, appended (another writer's taints may move; the end stays the end).
  if (failed && failedTaint.enabled && !taints.some(isFailedTaint)) {
    const taint = { key: failedTaint.key, value: 'true', effect: 'NoSchedule' };
    if (node.spec?.taints === undefined) ops.push({ op: 'test', path: '/spec/taints', value: null }, { op: 'add', path: '/spec/taints', value: [taint] });
    else ops.push({ op: 'add', path: '/spec/taints/-', value: taint });
  }

  if (open) {
    const { key, value } = config.nodeManagement.verifiedLabel;
    if (node.metadata?.labels === undefined) ops.push({ op: 'test', path: '/metadata/labels', value: null });
    ops.push(...setMapEntries(node.metadata?.labels, '/metadata/labels', { [key]: value }));
  }

  ops.push(...setMapEntries(node.metadata?.annotations, '/metadata/annotations', stateAnnotations(state)));
  return ops;
}

/** The taints a successful verification removes (for logs and events). */
export function taintsToRemove(node: V1Node, config: ControllerConfig): string[] {
  return nodeTaints(node)
    .filter((t) => isVerificationTaint(t, config))
    .map(formatTaint);
}

/**
 * Tests that the node is the one we read and our state on it is what we read, key by key (null:
 * absent). A value the API server cannot compare (see comparableByTest) is not tested; it is free
 * text (last-message) written only together with the attempt, failures and phase, which are.
 */
function guards(node: V1Node): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/uid', value: node.metadata?.uid ?? '' }];
  // No map at all: none of our keys, and the patch creates the map.
  if (node.metadata?.annotations === undefined) return [...ops, { op: 'test', path: '/metadata/annotations', value: null }];
  for (const key of Object.values(Annotation)) {
    const value = annotation(node, key) ?? null;
    if (value !== null && !comparableByTest(value)) continue;
    ops.push({ op: 'test', path: `/metadata/annotations/${escapePointer(key)}`, value });
  }
  return ops;
}

/**
 * Whether a JSON patch `test` of this string can succeed. kube-apiserver's JSON patch
 * (evanphx/json-patch) compares a string by its JSON bytes, and the server encodes the object with
 * Go's HTML-safe escaping (<, >, & as \u003c..., U+2028/U+2029 escaped, broken surrogates as
 * U+FFFD) while our patch carries JSON.stringify's bytes: such a test always fails (HTTP 422), and a
 * guard on it would refuse every later write to the node. Found by the fault suite: a worker whose
 * termination message held "<" left its node in Backoff for good.
 */
export function comparableByTest(value: string): boolean {
  return !/[<>&\u2028\u2029]/.test(value) && value.isWellFormed();
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
