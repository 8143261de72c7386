import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import type { Clock } from '../clock.js';
import type { EventType, Reason } from './reasons.js';

/**
 * Core/v1 Events about Nodes, the way the kubelet writes them so `kubectl describe node` shows
 * them: namespace `default`, involvedObject {kind: Node, name, uid: <node name>} (kubectl
 * searches node events by name as UID). Repeats of the same reason and message for the same node
 * within `aggregateWindowMs` bump the existing Event's count instead of creating another.
 * Recording never throws: an Event is best effort, failures are logged.
 */
export interface EventRecorder {
  nodeEvent(node: string, type: EventType, reason: Reason, message: string): Promise<void>;
}

/** What an Event is about (core/v1 ObjectReference, the fields we set). */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

/** The two API calls a recorder needs (tests pass a recording fake). */
export interface EventSink {
  create(namespace: string, event: CoreV1Event): Promise<void>;
  /** Merge-patch count and lastTimestamp of an existing Event. */
  bump(namespace: string, name: string, count: number, lastTimestamp: string): Promise<void>;
}

export interface KubeEventRecorderOptions {
  sink: EventSink;
  clock: Clock;
  log: Logger;
  /** reportingComponent / source.component. */
  component: string;
  /** reportingInstance / source.host (the pod name). */
  instance: string;
  aggregateWindowMs?: number;
  /** Bound on remembered events for aggregation (oldest forgotten first). */
  maxRemembered?: number;
}

const NAMESPACE = 'default';
const MAX_MESSAGE = 1024;

interface Remembered {
  name: string;
  count: number;
  firstAt: number;
}

export class KubeEventRecorder implements EventRecorder {
  private readonly seen = new Map<string, Remembered>();
  private readonly window: number;
  private readonly max: number;

  constructor(private readonly opts: KubeEventRecorderOptions) {
    this.window = opts.aggregateWindowMs ?? 10 * 60_000;
    this.max = opts.maxRemembered ?? 4096;
  }

  async nodeEvent(node: string, type: EventType, reason: Reason, message: string): Promise<void> {
    return this.objectEvent({ apiVersion: 'v1', kind: 'Node', name: node, uid: node }, type, reason, message);
  }

  /**
   * An Event about any object (remediation writes them on Karpenter NodeClaims), with the same
   * namespace, aggregation and error handling as node Events.
   */
  async objectEvent(object: InvolvedObject, type: EventType, reason: Reason, message: string): Promise<void> {
    const now = this.opts.clock.now();
    const nowIso = new Date(now).toISOString();
    const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const key = `${object.kind}\u0000${object.uid}\u0000${type}\u0000${reason}\u0000${text}`;
    const previous = this.seen.get(key);
    try {
      if (previous && now - previous.firstAt < this.window) {
        previous.count += 1;
        await this.opts.sink.bump(NAMESPACE, previous.name, previous.count, nowIso);
        return;
      }
      const name = eventName(object.name, now);
      await this.opts.sink.create(NAMESPACE, {
        metadata: { name, namespace: NAMESPACE },
        involvedObject: { ...object },
        type,
        reason,
        message: text,
        count: 1,
        firstTimestamp: nowIso as unknown as Date,
        lastTimestamp: nowIso as unknown as Date,
        source: { component: this.opts.component, host: this.opts.instance },
        reportingComponent: this.opts.component,
        reportingInstance: this.opts.instance,
      });
      this.remember(key, { name, count: 1, firstAt: now });
    } catch (err) {
      this.seen.delete(key);
      this.opts.log.warn({ [object.kind.toLowerCase()]: object.name, reason, err: errorMessage(err) }, 'could not record event');
    }
  }

  private remember(key: string, entry: Remembered): void {
    this.seen.delete(key);
    this.seen.set(key, entry);
    while (this.seen.size > this.max) {
      const oldest = this.seen.keys().next().value as string;
      this.seen.delete(oldest);
    }
  }
}

/** `<object>.<hex nanoseconds>` like client-go, the object part shortened to keep within 253. */
export function eventName(node: string, nowMs: number): string {
  const suffix = `.${(BigInt(nowMs) * 1_000_000n + BigInt(Math.floor(Math.random() * 1_000_000))).toString(16)}`;
  return `${node.slice(0, 253 - suffix.length).replace(/[.-]+$/, '')}${suffix}`;
}

/** Records nothing; logs instead (dry-run tests, and when Events are not wanted). */
export class LogEventRecorder implements EventRecorder {
  constructor(private readonly log: Logger) {}

  async nodeEvent(node: string, type: EventType, reason: Reason, message: string): Promise<void> {
    this.log.info({ node, type, reason }, message);
  }
}
