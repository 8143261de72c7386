import type { Logger } from '@kube-node-ready/core';
import { k8s, statusCode } from '../kube.js';

/** The reasons a kubelet gives its pod Events (k8s.io/kubernetes/pkg/kubelet/events). */
export const REASON = {
  pulling: 'Pulling',
  pulled: 'Pulled',
  errImageNeverPull: 'ErrImageNeverPull',
  created: 'Created',
  started: 'Started',
  failed: 'Failed',
  killing: 'Killing',
  unhealthy: 'Unhealthy',
  backOff: 'BackOff',
  failedCreatePodSandBox: 'FailedCreatePodSandBox',
} as const;

export type EventType = 'Normal' | 'Warning';

/** The pod (and container, by its field path) an Event is about, and the node whose kubelet reports it. */
export interface EventSubject {
  namespace: string;
  name: string;
  uid: string;
  node: string;
  /** `spec.containers{main}` or `spec.initContainers{init}`; absent for Events about the pod. */
  fieldPath?: string;
}

export interface KubeletEventsOptions {
  /** Event writes in flight at once (they compete with status writes, which matter more). */
  concurrency?: number;
  /** Events waiting beyond this are dropped, as a kubelet's event broadcaster drops on a full queue. */
  maxQueued?: number;
  /** Identical Events remembered for aggregation (a kubelet's correlator keeps an LRU of 4096). */
  cacheSize?: number;
}

interface Seen {
  name: string;
  count: number;
  /** The count the API server has (a patch raising it is queued or in flight when it lags). */
  sent: number;
  created: boolean;
  patching: boolean;
}

/**
 * Writes pod Events the way a kubelet does: core/v1 Events in the pod's namespace with
 * source.component `kubelet` and the node as host (reportingComponent `kubelet`, reportingInstance
 * the node), named `<pod>.<hex nanoseconds>`. An Event identical to one already written (same pod,
 * container, type, reason and message) raises that Event's count and lastTimestamp instead of
 * creating another, as client-go's correlator does.
 *
 * Writes are cheap by construction: fire and forget, a few in flight at once, queued in order
 * (status writes are never held up by them), and dropped, with a debug line, when the queue is full.
 */
export class KubeletEvents {
  private readonly queue: Array<() => Promise<void>> = [];
  private inFlight = 0;
  private readonly seen = new Map<string, Seen>();
  private lastNanos = 0n;
  private readonly concurrency: number;
  private readonly maxQueued: number;
  private readonly cacheSize: number;
  dropped = 0;

  constructor(
    private readonly core: k8s.CoreV1Api,
    private readonly log: Logger,
    opts: KubeletEventsOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? 4;
    this.maxQueued = opts.maxQueued ?? 5000;
    this.cacheSize = opts.cacheSize ?? 4096;
  }

  record(subject: EventSubject, type: EventType, reason: string, message: string): void {
    const key = `${subject.uid}\0${subject.fieldPath ?? ''}\0${type}\0${reason}\0${message}`;
    const known = this.seen.get(key);
    const now = new Date();
    if (known) {
      known.count++;
      this.seen.delete(key); // keep the map in least-recently-used order
      this.seen.set(key, known);
      if (known.created && !known.patching) {
        known.patching = true;
        if (!this.enqueue(() => this.patch(subject, known))) known.patching = false;
      }
      return;
    }
    const entry: Seen = { name: `${subject.name}.${this.nanos(now).toString(16)}`, count: 1, sent: 0, created: false, patching: false };
    this.seen.set(key, entry);
    if (this.seen.size > this.cacheSize) this.seen.delete(this.seen.keys().next().value!);
    this.enqueue(() => this.create(subject, type, reason, message, entry, now));
  }

  /** Forgets the aggregation state of a pod that is gone. */
  forgetPod(uid: string): void {
    for (const key of this.seen.keys()) if (key.startsWith(`${uid}\0`)) this.seen.delete(key);
  }

  /** Events waiting to be written or being written (tests and stats). */
  pending(): number {
    return this.queue.length + this.inFlight;
  }

  private async create(s: EventSubject, type: EventType, reason: string, message: string, entry: Seen, at: Date): Promise<void> {
    const count = entry.count;
    const body: k8s.CoreV1Event = {
      metadata: { name: entry.name, namespace: s.namespace },
      involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace: s.namespace, name: s.name, uid: s.uid, ...(s.fieldPath ? { fieldPath: s.fieldPath } : {}) },
      type,
      reason,
      message,
      source: { component: 'kubelet', host: s.node },
      reportingComponent: 'kubelet',
      reportingInstance: s.node,
      firstTimestamp: at,
      lastTimestamp: at,
      count,
    };
    try {
      await this.core.createNamespacedEvent({ namespace: s.namespace, body });
      entry.created = true;
      entry.sent = count;
      if (entry.count > entry.sent && !entry.patching) {
        entry.patching = true;
        await this.patch(s, entry);
      }
    } catch (err) {
      // A namespace being deleted refuses new Events (403); nothing to do about either.
      this.log.debug({ err: String(err), pod: `${s.namespace}/${s.name}`, reason }, 'event not recorded');
    }
  }

  private async patch(s: EventSubject, entry: Seen): Promise<void> {
    try {
      while (entry.count > entry.sent) {
        const count = entry.count;
        await this.core.patchNamespacedEvent(
          { name: entry.name, namespace: s.namespace, body: { count, lastTimestamp: new Date().toISOString() } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
        entry.sent = count;
      }
    } catch (err) {
      if (statusCode(err) === 404) entry.created = false; // expired: the next occurrence is a new Event
      this.log.debug({ err: String(err), pod: `${s.namespace}/${s.name}` }, 'event count not updated');
    } finally {
      entry.patching = false;
    }
  }

  private enqueue(write: () => Promise<void>): boolean {
    if (this.queue.length >= this.maxQueued) {
      if (this.dropped++ % 1000 === 0) this.log.debug({ dropped: this.dropped }, 'event queue full: events dropped');
      return false;
    }
    this.queue.push(write);
    this.drain();
    return true;
  }

  private drain(): void {
    while (this.inFlight < this.concurrency && this.queue.length) {
      const write = this.queue.shift()!;
      this.inFlight++;
      void write().finally(() => {
        this.inFlight--;
        this.drain();
      });
    }
  }

  /** Unique, increasing nanoseconds for Event names (a kubelet uses the time of the Event in ns). */
  private nanos(at: Date): bigint {
    let n = BigInt(at.getTime()) * 1_000_000n;
    if (n <= this.lastNanos) n = this.lastNanos + 1n;
    this.lastNanos = n;
    return n;
  }
}

/** The field path of a container in an Event's involvedObject. */
export function containerFieldPath(container: string, init = false): string {
  return `spec.${init ? 'initContainers' : 'containers'}{${container}}`;
}
