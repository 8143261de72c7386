import { GROUP } from '../../../api/well-known.js';

/**
 * Every name remediation reads or writes: annotations and labels it honours, the Karpenter API it
 * calls, its metric label values and its Event reasons. The metric values and reasons are kept here
 * until the composition root wires remediation in; then they move to metrics/names.ts and
 * events/reasons.ts (one module each) and this file re-exports them.
 */

/**
 * `kube-node-ready.io/remediation: disabled` on a Node: never delete it (nor its NodeClaim). Any
 * value other than `enabled` opts out too (a typo must not make a node deletable).
 */
export const OPT_OUT_ANNOTATION = `${GROUP}/remediation`;
export const OPT_OUT_VALUE = 'disabled';
/** The one value of the annotation that does not opt out (the same as no annotation). */
export const OPT_IN_VALUE = 'enabled';

/** Labels that mark a control-plane node (kubeadm's current and legacy names). */
export const CONTROL_PLANE_LABELS = ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'] as const;

export const KarpenterApi = {
  Group: 'karpenter.sh',
  Version: 'v1',
  NodeClaimPlural: 'nodeclaims',
  NodeClaimKind: 'NodeClaim',
  /** `karpenter.sh/do-not-disrupt: "true"` on a Node (or on its NodeClaim): Karpenter's own opt-out. */
  DoNotDisruptAnnotation: 'karpenter.sh/do-not-disrupt',
  NodePoolLabel: 'karpenter.sh/nodepool',
} as const;

// ---------------------------------------------------------------------------------------------
// Metrics (names as in metrics/names.ts; the label values are the ones issue 5 asks for)

export const RemediationMetricName = {
  RemediationsTotal: 'kube_node_ready_remediations_total',
  RemediationBlocked: 'kube_node_ready_remediation_blocked',
} as const;

/** kube_node_ready_remediations_total{action}: what was (or would have been) deleted. */
export const RemediationAction = ['delete-nodeclaim', 'delete-node'] as const;
export type RemediationAction = (typeof RemediationAction)[number];

/** kube_node_ready_remediations_total{result}. */
export const RemediationResult = ['deleted', 'dry-run', 'skipped', 'error'] as const;
export type RemediationResult = (typeof RemediationResult)[number];

/** kube_node_ready_remediation_blocked{reason}: 1 while every deletion is held back for it. */
export const BlockReason = ['circuit-breaker', 'rate-limit', 'in-flight'] as const;
export type BlockReason = (typeof BlockReason)[number];

// ---------------------------------------------------------------------------------------------
// Event reasons (on the Node, and on its NodeClaim when there is one)

export const RemediationReason = {
  /** The NodeClaim was deleted: Karpenter drains the node and terminates the instance. */
  NodeClaimDeleted: 'RemediationNodeClaimDeleted',
  /** The Node object was deleted (no NodeClaim): the machine may keep running. */
  NodeDeleted: 'RemediationNodeDeleted',
  /** A guard says this node must not be deleted (control plane, opt-out, do-not-disrupt, too young...). */
  Skipped: 'RemediationSkipped',
  /** Deletions are held back (circuit breaker, in-flight limit, hourly limit); retried automatically. */
  Blocked: 'RemediationBlocked',
  /** Dry run: the node would have been deleted. */
  DryRun: 'RemediationDryRun',
  /** The lookup or the delete call failed; retried. */
  Failed: 'RemediationFailed',
  /** A deletion was issued long ago (inFlightTimeout) and the node still exists. */
  Stalled: 'RemediationStalled',
} as const;
export type RemediationReason = (typeof RemediationReason)[keyof typeof RemediationReason];
