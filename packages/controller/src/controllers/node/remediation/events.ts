import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { EventType } from '../../../events/reasons.js';
import { eventName, type EventSink } from '../../../events/recorder.js';
import type { NodeClaimRef } from './executor.js';
import { KarpenterApi, type RemediationReason } from './names.js';

/**
 * Remediation reports each decision on the Node (`kubectl describe node`) and, when the node has
 * one, on its NodeClaim (`kubectl describe nodeclaim`). Node Events go through the controller's
 * shared recorder (same aggregation as every other node Event); NodeClaim Events are written here,
 * the way Karpenter writes its own: namespace `default`, involvedObject karpenter.sh/v1 NodeClaim
 * with its real UID. Recording never throws.
 */
export interface RemediationEvents {
  node(node: string, type: EventType, reason: RemediationReason, message: string): Promise<void>;
  nodeClaim(claim: NodeClaimRef, type: EventType, reason: RemediationReason, message: string): Promise<void>;
}

/** The controller's node recorder (events/recorder.ts KubeEventRecorder satisfies it). */
export interface NodeEventRecorder {
  nodeEvent(node: string, type: EventType, reason: string, message: string): Promise<void>;
}

export interface KubeRemediationEventsOptions {
  nodes: NodeEventRecorder;
  sink: EventSink;
  clock: Clock;
  log: Logger;
  component: string;
  instance: string;
  aggregateWindowMs?: number;
}

const NAMESPACE = 'default';
const MAX_MESSAGE = 1024;
const MAX_REMEMBERED = 1024;

export class KubeRemediationEvents implements RemediationEvents {
  private readonly seen = new Map<string, { name: string; count: number; firstAt: number }>();

  constructor(private readonly opts: KubeRemediationEventsOptions) {}

  node(node: string, type: EventType, reason: RemediationReason, message: string): Promise<void> {
    return this.opts.nodes.nodeEvent(node, type, reason, message);
  }

  async nodeClaim(claim: NodeClaimRef, type: EventType, reason: RemediationReason, message: string): Promise<void> {
    const now = this.opts.clock.now();
    const nowIso = new Date(now).toISOString();
    const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const key = `${claim.uid}\u0000${type}\u0000${reason}\u0000${text}`;
    const previous = this.seen.get(key);
    try {
      if (previous && now - previous.firstAt < (this.opts.aggregateWindowMs ?? 10 * 60_000)) {
        previous.count += 1;
        await this.opts.sink.bump(NAMESPACE, previous.name, previous.count, nowIso);
        return;
      }
      const name = eventName(claim.name, now);
      const event: CoreV1Event = {
        metadata: { name, namespace: NAMESPACE },
        involvedObject: { apiVersion: `${KarpenterApi.Group}/${KarpenterApi.Version}`, kind: KarpenterApi.NodeClaimKind, name: claim.name, uid: claim.uid },
        type,
        reason,
        message: text,
        count: 1,
        firstTimestamp: nowIso as unknown as Date,
        lastTimestamp: nowIso as unknown as Date,
        source: { component: this.opts.component, host: this.opts.instance },
        reportingComponent: this.opts.component,
        reportingInstance: this.opts.instance,
      };
      await this.opts.sink.create(NAMESPACE, event);
      this.seen.set(key, { name, count: 1, firstAt: now });
      while (this.seen.size > MAX_REMEMBERED) this.seen.delete(this.seen.keys().next().value as string);
    } catch (err) {
      this.seen.delete(key);
      this.opts.log.warn({ nodeClaim: claim.name, reason, err: errorMessage(err) }, 'could not record event');
    }
  }
}
