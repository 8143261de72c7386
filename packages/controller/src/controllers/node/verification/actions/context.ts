import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import type { NodeStatus } from '../../../../metrics/names.js';
import type { VerificationDeps } from '../controller.js';
import type { PodRef } from '../decide.js';
import type { NodeEvent } from '../events.js';
import type { NodeMemory } from '../memory.js';
import type { ConditionInput } from '../node-patch.js';
import type { VerificationState } from '../types.js';

/**
 * What an action's apply() may use: the controller's dependencies, its per-node memory, and the
 * steps every action shares (Events, pod deletion, waking the next nodes in line). There is one per
 * profile: `deps.config` is the configuration of the node's profile (config/profiles.ts).
 */
export interface ActionContext {
  deps: VerificationDeps;
  /** The name of the node's profile. */
  profile: string;
  memory: NodeMemory;
  /** Records an Event in the background (best effort, never awaited). */
  emit(node: string, event: NodeEvent): void;
  /** Deletes worker pods; a failure is logged and left to the next reconcile. */
  deletePods(pods: readonly PodRef[], log: Logger): Promise<void>;
  /** A verification slot was freed: wake the nodes first in line. */
  slotFreed(): void;
}

/** What the condition and the status metric say when it is not the stored progress (a node waiting to become launchable). */
export interface Report {
  status: NodeStatus;
  condition: ConditionInput;
}

export interface ReconcileResult {
  requeueAfterMs?: number;
  /** A conflict: reconcile again soon, backing off while it repeats (the runner's rate limiter). */
  requeue?: boolean;
}

/**
 * What apply() did. A refused write is a conflict: the node or its NodeVerification changed since
 * they were read, and the controller reads the node live and requeues it; a conflict found by
 * reading the node live carries that read (`live.node` undefined: it is gone).
 */
export type Applied =
  | { kind: 'done'; node: V1Node; state?: VerificationState; report?: Report; result: ReconcileResult }
  | { kind: 'conflict'; live?: { node: V1Node | undefined } };

export const CONFLICT: Applied = { kind: 'conflict' };

export function requeue(ms: number | undefined): ReconcileResult {
  return ms === undefined ? {} : { requeueAfterMs: Math.max(0, ms) };
}
