import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject, type V1Node, type V1ObjectMeta } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import type { Clock, Timer } from '../clock.js';
import { messageOf } from './errors.js';

/**
 * A cache of one resource kept current by list + watch, that heals itself.
 *
 * client-node's ListWatch re-lists on 410 Gone and reconnects after a normal close or a client
 * timeout, but stops for good after any other error (a failed list, a 403, a 500, a reset
 * connection) after firing `error` (PITFALLS). This wrapper restarts it with exponential backoff
 * (1 s doubling to 30 s, reset once a restart connects), counts restarts, and reports health.
 *
 * Every object entering the cache goes through `transform` (slimNode, stripObject: drop what the
 * controller never reads), then is stored as plain JSON: list results (typed, with Date fields) and
 * watch events (raw JSON, with string times) look the same. Read times with kube/objects toMillis.
 */
export interface InformerOptions<T extends KubernetesObject> {
  /** For logs and metrics: "nodes", "pods". */
  resource: string;
  /** API path of the collection, e.g. /api/v1/nodes or /api/v1/namespaces/kube-system/pods. */
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  kubeConfig: KubeConfig;
  labelSelector?: string;
  /** Applied to each object as the API returned it (typed or raw), before the plain copy is made. */
  transform?: (obj: T) => T;
  clock: Clock;
  log: Logger;
  onRestart?: () => void;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** A watch failing for longer than this makes health() report not ok. */
  unhealthyAfterMs?: number;
}

export interface InformerHandlers<T> {
  add?: (obj: T) => void;
  update?: (obj: T) => void;
  delete?: (obj: T) => void;
}

export class SelfHealingInformer<T extends KubernetesObject> {
  private readonly listWatch: ListWatch<T>;
  private synced = false;
  private stopped = false;
  private backoffMs: number;
  private restartTimer: Timer | undefined;
  /** When the current run of failures began (undefined while healthy). */
  private failingSince: number | undefined;
  private lastError = '';
  private errorsThisStart = 0;
  private readonly syncWaiters: Array<() => void> = [];

  constructor(private readonly opts: InformerOptions<T>) {
    this.backoffMs = opts.minBackoffMs ?? 1_000;
    // Cut first, then copy: only what the cache keeps goes through the JSON round trip (a node
    // heartbeat at a time, for every node).
    const transform = (obj: T): T => toPlain(opts.transform ? opts.transform(obj) : obj);
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await opts.list();
      // ListWatch applies the list to its cache as soon as this resolves, then connects the watch.
      // The cache is synced at that point; it need not wait for the watch's response headers.
      setImmediate(() => this.onListed());
      return { ...result, items: result.items.map(transform) };
    };
    this.listWatch = new ListWatch<T>(
      opts.path,
      new TransformingWatch(opts.kubeConfig, (obj) => transform(obj as T)),
      list,
      false,
      opts.labelSelector,
      undefined,
      { delayFn: (ms) => opts.clock.sleep(ms) },
    );
    this.listWatch.on('error', (err) => this.onError(err));
  }

  on(handlers: InformerHandlers<T>): void {
    if (handlers.add) this.listWatch.on('add', handlers.add);
    if (handlers.update) this.listWatch.on('update', handlers.update);
    if (handlers.delete) this.listWatch.on('delete', handlers.delete);
  }

  /** Starts list + watch; resolves once the cache has synced (or the informer is stopped). */
  async start(): Promise<void> {
    const synced = new Promise<void>((resolve) => this.syncWaiters.push(resolve));
    this.runOnce().catch((err: unknown) => this.onError(err));
    await synced;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restartTimer?.cancel();
    await this.listWatch.stop();
    for (const resolve of this.syncWaiters.splice(0)) resolve();
  }

  hasSynced(): boolean {
    return this.synced;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.listWatch.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.listWatch.list(namespace);
  }

  /** Not ok before the first sync, after stop(), and while the watch has been failing too long. */
  health(): { ok: boolean; reason?: string } {
    if (this.stopped) return { ok: false, reason: `${this.opts.resource} informer stopped` };
    if (!this.synced) return { ok: false, reason: `${this.opts.resource} cache not synced${this.lastError ? `: ${this.lastError}` : ''}` };
    const limit = this.opts.unhealthyAfterMs ?? 120_000;
    if (this.failingSince !== undefined && this.opts.clock.now() - this.failingSince > limit) {
      return { ok: false, reason: `${this.opts.resource} watch failing since ${new Date(this.failingSince).toISOString()}: ${this.lastError}` };
    }
    return { ok: true };
  }

  private async runOnce(): Promise<void> {
    if (this.stopped) return;
    this.errorsThisStart = 0;
    await this.listWatch.start();
    if (this.stopped || this.errorsThisStart > 0) return;
    // Listed and watching: healthy again.
    this.failingSince = undefined;
    this.backoffMs = this.opts.minBackoffMs ?? 1_000;
  }

  private onListed(): void {
    if (this.stopped) return;
    if (!this.synced) {
      this.synced = true;
      this.opts.log.info({ resource: this.opts.resource, objects: this.list().length }, 'cache synced');
    }
    for (const resolve of this.syncWaiters.splice(0)) resolve();
  }

  private onError(err: unknown): void {
    this.errorsThisStart++;
    if (this.stopped) return;
    this.lastError = messageOf(err);
    this.failingSince ??= this.opts.clock.now();
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.opts.maxBackoffMs ?? 30_000);
    this.opts.log.warn({ resource: this.opts.resource, err: this.lastError, retryInMs: delay }, 'watch stopped on an error; restarting');
    this.restartTimer?.cancel();
    this.restartTimer = this.opts.clock.setTimer(delay, () => {
      this.opts.onRestart?.();
      this.runOnce().catch((err: unknown) => this.onError(err));
    });
  }
}

/** A Watch whose events carry transformed objects (ERROR events pass through untouched). */
class TransformingWatch extends Watch {
  constructor(
    config: KubeConfig,
    private readonly transform: (obj: unknown) => unknown,
  ) {
    super(config);
  }

  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      queryParams,
      (phase, obj, watchObj) => callback(phase, phase === 'ERROR' || phase === 'BOOKMARK' ? obj : this.transform(obj), watchObj),
      done,
    );
  }
}

function toPlain<T>(obj: T): T {
  return JSON.parse(JSON.stringify(obj)) as T;
}

/**
 * A node cut to what the controller reads, for the node cache and the copies its own writes and
 * live reads return: name, uid, resourceVersion, creation and deletion times, labels, annotations,
 * ownerReferences (a Karpenter NodeClaim), taints, providerID, the condition of type
 * `conditionType` (ours), and Ready without its heartbeat. The rest (other conditions, addresses, capacity, nodeInfo, images, volumes,
 * managedFields) is most of a real Node and none of our business; with 5000 nodes it is the
 * difference between about 2.7 and 0.8 KiB of heap per node for a small one (docs/benchmarks.md).
 */
export function slimNode(node: V1Node, conditionType: string): V1Node {
  const m = node.metadata ?? {};
  const metadata: V1ObjectMeta = {};
  if (m.name !== undefined) metadata.name = m.name;
  if (m.uid !== undefined) metadata.uid = m.uid;
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (m.creationTimestamp !== undefined) metadata.creationTimestamp = m.creationTimestamp;
  if (m.deletionTimestamp !== undefined) metadata.deletionTimestamp = m.deletionTimestamp;
  if (m.labels !== undefined) metadata.labels = m.labels;
  if (m.annotations !== undefined) metadata.annotations = m.annotations;
  if (m.ownerReferences !== undefined) metadata.ownerReferences = m.ownerReferences;
  const slim: V1Node = { metadata };
  if (node.spec?.taints !== undefined || node.spec?.providerID !== undefined) {
    slim.spec = {};
    if (node.spec.taints !== undefined) slim.spec.taints = node.spec.taints;
    if (node.spec.providerID !== undefined) slim.spec.providerID = node.spec.providerID;
  }
  // Our condition, and Ready without its heartbeat (whether a worker can be launched: decide()).
  const kept = (node.status?.conditions ?? []).flatMap((c) => {
    if (c.type === conditionType) return [c];
    if (c.type !== 'Ready') return [];
    const { lastHeartbeatTime: _heartbeat, ...ready } = c;
    return [ready];
  });
  if (kept.length) slim.status = { conditions: kept };
  return slim;
}

/** Drops what the controller never reads from a cached object (the worker pods): managedFields. Nodes go through slimNode. */
export function stripObject<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata) delete obj.metadata.managedFields;
  return obj;
}
