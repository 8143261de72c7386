import { NodeAnnotation } from '../../../api/well-known.js';
import { Reason } from '../../../events/reasons.js';
import { MetricName, RemediationAction, RemediationBlockReason, RemediationResult } from '../../../metrics/names.js';

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
export const OPT_OUT_ANNOTATION = NodeAnnotation.RemediationOptOut;
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
  DoNotDisruptAnnotation: NodeAnnotation.KarpenterDoNotDisrupt,
  NodePoolLabel: 'karpenter.sh/nodepool',
} as const;

// ---------------------------------------------------------------------------------------------
// Metrics and Event reasons: defined in metrics/names.ts and events/reasons.ts (one module each).

export const RemediationMetricName = {
  RemediationsTotal: MetricName.RemediationsTotal,
  RemediationBlocked: MetricName.RemediationBlocked,
} as const;
export { RemediationAction, RemediationResult };
export const BlockReason = RemediationBlockReason;
export type BlockReason = RemediationBlockReason;

export const RemediationReason = {
  NodeClaimDeleted: Reason.RemediationNodeClaimDeleted,
  NodeDeleted: Reason.RemediationNodeDeleted,
  Skipped: Reason.RemediationSkipped,
  Blocked: Reason.RemediationBlocked,
  DryRun: Reason.RemediationDryRun,
  Failed: Reason.RemediationFailed,
  Stalled: Reason.RemediationStalled,
} as const;
export type RemediationReason = (typeof RemediationReason)[keyof typeof RemediationReason];
