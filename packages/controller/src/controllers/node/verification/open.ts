import type { V1Node } from '@kubernetes/client-node';
import type { ControllerConfig } from '../../../config/schema.js';
import type { KubeClient } from '../../../kube/client.js';
import { isConflict } from '../../../kube/errors.js';
import { nodeName } from '../../../kube/objects.js';
import { Priority } from '../../../kube/throttle.js';
import { nodePatch } from './node-patch.js';
import type { ProgressStore } from './store.js';
import type { VerificationState } from './types.js';

/**
 * Opens a node that passed: our verification taints off and the verified label on (and the failed
 * taint off, if a reset left it), in one JSON patch guarded by `test` operations on the node UID
 * and each taint removed (node-patch.ts). Written before the status that records the pass, so a
 * Passed status always has an open node behind it. Returns the node as written, or 'conflict' when
 * it changed since it was read (the caller decides again on a live copy). Dry run opens nothing.
 */
export async function openNode(kube: Pick<KubeClient, 'patchNode'>, node: V1Node, passed: VerificationState, config: ControllerConfig): Promise<V1Node | 'conflict'> {
  if (config.dryRun) return node;
  const ops = nodePatch({ node, config, state: passed, open: true });
  if (!ops.some((op) => op.op !== 'test')) return node;
  try {
    return await kube.patchNode(nodeName(node), ops, Priority.High);
  } catch (err) {
    if (isConflict(err)) return 'conflict';
    throw err;
  }
}

/**
 * Stores a finished attempt's outcome: another installation's node is refused before any write, a
 * pass opens the node first, then the state is stored. The node as written, or 'conflict'.
 */
export async function storeOutcome(
  deps: { kube: Pick<KubeClient, 'patchNode'>; store: ProgressStore; config: ControllerConfig },
  node: V1Node,
  state: VerificationState,
  open: boolean,
): Promise<V1Node | 'conflict'> {
  deps.store.assertOurs(node);
  const opened = open ? await openNode(deps.kube, node, state, deps.config) : node;
  return opened === 'conflict' ? 'conflict' : deps.store.save(opened, state);
}
