import type { EventType } from '../../../events/reasons.js';
import type { InvolvedObject } from '../../../events/recorder.js';
import type { NodeClaimRef } from './executor.js';
import { KarpenterApi, type RemediationReason } from './names.js';

/**
 * Remediation reports each decision on the Node (`kubectl describe node`) and, when the node has
 * one, on its NodeClaim (`kubectl describe nodeclaim`), both through the controller's one Event
 * recorder (events/recorder.ts: namespace `default`, same aggregation, never throws). NodeClaim
 * Events are written the way Karpenter writes its own: involvedObject karpenter.sh/v1 NodeClaim
 * with its real UID.
 */
export interface RemediationEvents {
  node(node: string, type: EventType, reason: RemediationReason, message: string): Promise<void>;
  nodeClaim(claim: NodeClaimRef, type: EventType, reason: RemediationReason, message: string): Promise<void>;
}

/** The controller's recorder (events/recorder.ts KubeEventRecorder satisfies it). */
export interface ObjectEventRecorder {
  nodeEvent(node: string, type: EventType, reason: RemediationReason, message: string): Promise<void>;
  objectEvent(object: InvolvedObject, type: EventType, reason: RemediationReason, message: string): Promise<void>;
}

export class KubeRemediationEvents implements RemediationEvents {
  constructor(private readonly recorder: ObjectEventRecorder) {}

  node(node: string, type: EventType, reason: RemediationReason, message: string): Promise<void> {
    return this.recorder.nodeEvent(node, type, reason, message);
  }

  nodeClaim(claim: NodeClaimRef, type: EventType, reason: RemediationReason, message: string): Promise<void> {
    const object = { apiVersion: `${KarpenterApi.Group}/${KarpenterApi.Version}`, kind: KarpenterApi.NodeClaimKind, name: claim.name, uid: claim.uid };
    return this.recorder.objectEvent(object, type, reason, message);
  }
}
