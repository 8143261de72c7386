import { ListWatch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import type { Clock, Timer } from '../clock.js';
import { messageOf } from './errors.js';
import { DEFAULT_WATCH_TIMEOUT_SECONDS, ResumingWatch } from './watch.js';

export interface InformerOptions<T extends KubernetesObject> {
  /** For logs and metrics: "nodes", "pods". */
  resource: string;
  /** API path of the collection, e.g. /api/v1/nodes or /api/v1/namespaces/kube-system/pods. */
  path: string;
  /**
   * The resource's list, page by page: the informer keeps what `transform` keeps of each page as it
   * arrives, so a page is garbage once the next is asked for (5000 Nodes of 15 KB are 75 MB of JSON).
   */
  list: () => AsyncIterable<KubernetesListObject<T>>;
  kubeConfig: KubeConfig;
  labelSelector?: string;
  /** Applied to each object as the API returned it (typed or raw), before the plain copy is made. */
  transform?: (obj: T) => T;
  clock: Clock;
  log: Logger;
  onRestart?: () => void;
  /** Called as each list request starts: at start, then whenever the watch cannot resume (410 Gone, a restart after a failed list). */
  onList?: () => void;
  /** Called once each list has been applied to the cache (the first is the sync). */
  onListed?: () => void;
  /** Called as each watch request starts, with the resourceVersion it resumes from. */
  onWatch?: (resourceVersion: string) => void;
  /**
   * The longest watch asked of the apiserver (timeoutSeconds; each watch asks for 80-100 % of it).
   * Default and maximum DEFAULT_WATCH_TIMEOUT_SECONDS (25); tests shorten it to see watches cycle.
   */
  watchTimeoutSeconds?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** A watch failing for longer than this makes health() report not ok. */
  unhealthyAfterMs?: number;
  /** The key byIndex() finds an object under (client-go's indexer), e.g. a worker pod's node; undefined: not indexed. */
  indexBy?: (obj: T) => string | undefined;
}

export interface InformerHandlers<T> {
  add?: (obj: T) => void;
  update?: (obj: T) => void;
  delete?: (obj: T) => void;
}

/**
 * A cache of one resource kept current by list + watch, that heals itself.
 *
 * client-node's ListWatch re-lists on 410 Gone and reconnects after a normal close or a client
 * timeout, but stops for good after any other error (a failed list, a 403, a 500, a reset
 * connection) after firing `error` (PITFALLS). This wrapper restarts it with exponential backoff
 * (1 s doubling to 30 s, reset once a restart connects), counts restarts, and reports health.
 *
 * Lists are rare; watches resume. Each watch asks for bookmarks and a server-side timeout of 20-25 s
 * (`watchTimeoutSeconds`). The apiserver's watch cache sends a bookmark carrying its latest
 * resourceVersion of the resource about 2 s before that timeout (and once a minute on longer watches),
 * then ends the watch cleanly; ListWatch takes the resourceVersion of every event, bookmarks
 * included, and resumes from it at once. So a watch whose selector matches nothing that changes
 * still resumes from a resourceVersion seconds old. Without bookmarks it would resume from its
 * list's, which the watch cache forgets once its history of the resource has moved on past it (it
 * keeps at least 75 s of events): 410 Gone and a full list, every minute or two in a busy cluster,
 * e.g. of every node for a node selector that matches a few. `onList` counts lists.
 *
 * A watch the server has not ended 5 s after its timeout (a connection gone silent) is ended by the
 * client (ResumingWatch, kube/watch.ts) and resumed from where it was: a dead connection goes
 * unnoticed for 30 s at most. Longer watches would leave it unnoticed for longer and bring bookmarks
 * only once a minute; client-go can ask for 5-10 minute watches because it finds dead connections
 * with HTTP/2 pings, which this HTTP/1.1 client does not have.
 *
 * Every object entering the cache goes through `transform` (the verification controller's slimNode,
 * stripObject: drop what the controller never reads), then is stored as plain JSON: list results (typed, with Date fields) and
 * watch events (raw JSON, with string times) look the same. Read times with kube/objects toMillis.
 */
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
  private readonly index: CacheIndex<T> | undefined;

  constructor(private readonly opts: InformerOptions<T>) {
    this.backoffMs = opts.minBackoffMs ?? 1_000;
    const cut = (obj: T): T => (opts.transform ? opts.transform(obj) : obj);
    // A list's objects are client-node's typed ones (Date fields): cut first, then copied as plain
    // JSON, so only what the cache keeps makes the round trip. Watch events are plain JSON already.
    const transform = (obj: T): T => toPlain(cut(obj));
    const list = async (): Promise<KubernetesListObject<T>> => {
      opts.onList?.();
      const items: T[] = [];
      let last: KubernetesListObject<T> | undefined;
      for await (const page of opts.list()) {
        for (const obj of page.items) items.push(transform(obj));
        last = page;
      }
      // ListWatch applies the list to its cache as soon as this resolves, then connects the watch.
      // The cache is synced at that point; it need not wait for the watch's response headers.
      setImmediate(() => this.onListed());
      // The last page's resourceVersion is the list's: the watch resumes from it.
      return { ...last, metadata: { ...last?.metadata, _continue: undefined }, items };
    };
    this.listWatch = new ListWatch<T>(
      opts.path,
      new ResumingWatch(opts.kubeConfig, {
        transform: (obj) => cut(obj as T),
        maxTimeoutSeconds: opts.watchTimeoutSeconds ?? DEFAULT_WATCH_TIMEOUT_SECONDS,
        ...(opts.onWatch ? { onWatch: opts.onWatch } : {}),
      }),
      list,
      false,
      opts.labelSelector,
      undefined,
      { delayFn: (ms) => opts.clock.sleep(ms) },
    );
    this.listWatch.on('error', (err) => this.onError(err));
    if (opts.indexBy) {
      // Registered before anyone's handlers: a handler reading byIndex() sees the event applied.
      const index = (this.index = new CacheIndex(opts.indexBy));
      this.listWatch.on('add', (obj) => index.put(obj));
      this.listWatch.on('update', (obj) => index.put(obj));
      this.listWatch.on('delete', (obj) => index.remove(obj));
    }
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

  /** The cached objects `indexBy` files under `key` (none without `indexBy`). */
  byIndex(key: string): readonly T[] {
    return this.index?.get(key) ?? [];
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
    this.opts.onListed?.();
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

/**
 * Cached objects grouped by a key, kept by the cache's own add, update and delete events (a relist
 * included: client-node reports what it dropped as deletes). An object whose key changes moves.
 */
export class CacheIndex<T extends KubernetesObject> {
  private readonly groups = new Map<string, Map<string, T>>();
  private readonly keys = new Map<string, string>();

  constructor(private readonly keyOf: (obj: T) => string | undefined) {}

  put(obj: T): void {
    const id = objectId(obj);
    this.remove(obj);
    const key = this.keyOf(obj);
    if (key === undefined) return;
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = new Map()));
    group.set(id, obj);
    this.keys.set(id, key);
  }

  remove(obj: T): void {
    const id = objectId(obj);
    const key = this.keys.get(id);
    if (key === undefined) return;
    this.keys.delete(id);
    const group = this.groups.get(key);
    group?.delete(id);
    if (group?.size === 0) this.groups.delete(key);
  }

  get(key: string): T[] {
    return [...(this.groups.get(key)?.values() ?? [])];
  }
}

function objectId(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

function toPlain<T>(obj: T): T {
  return JSON.parse(JSON.stringify(obj)) as T;
}

/** Drops what the controller never reads from a cached object (the worker pods): managedFields. Nodes go through the verification controller's slimNode. */
export function stripObject<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata) delete obj.metadata.managedFields;
  return obj;
}
