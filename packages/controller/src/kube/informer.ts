import { STATUS_CODES } from 'node:http';
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject, type V1Node, type V1ObjectMeta } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import type { Clock, Timer } from '../clock.js';
import { NodeAnnotation } from '../api/well-known.js';
import { messageOf } from './errors.js';
import { PooledKubeConfig } from './config.js';
import { LeanRequests } from './lean.js';

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
 * client and resumed from where it was: a dead connection goes unnoticed for 30 s at most. Longer
 * watches would leave it unnoticed for longer and bring bookmarks only once a minute; client-go can
 * ask for 5-10 minute watches because it finds dead connections with HTTP/2 pings, which this
 * HTTP/1.1 client does not have.
 *
 * Every object entering the cache goes through `transform` (slimNode, stripObject: drop what the
 * controller never reads), then is stored as plain JSON: list results (typed, with Date fields) and
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

/**
 * A quiet watch's only data is the bookmark the apiserver sends 2 s before the watch's timeout (its
 * other bookmarks come a minute apart), and a watch the server has not ended WATCH_END_GRACE_MS after
 * its timeout is given up on: with 25 s a dead connection is noticed within 30 s. 20-25 s watches cost
 * the apiserver next to nothing (a resume is served from its watch cache: no list, no etcd read).
 */
export const DEFAULT_WATCH_TIMEOUT_SECONDS = 25;
/** How long after its timeoutSeconds the client waits for the server to end a watch. */
const WATCH_END_GRACE_MS = 5_000;

interface ResumingWatchOptions {
  /** Applied to the object of each ADDED, MODIFIED and DELETED event (ERROR and BOOKMARK pass through). */
  transform: (obj: unknown) => unknown;
  /** At most DEFAULT_WATCH_TIMEOUT_SECONDS; each watch asks for 80-100 % of it. */
  maxTimeoutSeconds: number;
  onWatch?: (resourceVersion: string) => void;
}

/**
 * A Watch that asks for bookmarks and a server-side timeout, and ends a watch the server has not
 * ended soon after that timeout (as a TimeoutError: ListWatch resumes at once from where it was).
 * Event objects go through `transform`.
 *
 * The stream is read without client-node's Watch, which reads it through fetch, a web stream, a Node
 * stream adapter and readline before it parses a line: every watch event of every cached object
 * crosses that path (docs/benchmarks.md). Here the request goes out on the connection pool through
 * LeanRequests, and each line of the answer is cut from its buffers and parsed. What ListWatch sees
 * is client-node's contract: `callback(type, object, event)` for each event (a line that does not
 * parse, or a callback that throws, is skipped, as client-node skips it), then `done` exactly once:
 * `null` when the server ends the watch, an Error with `statusCode` when it refuses it (410 Gone
 * makes ListWatch list again), a TimeoutError DOMException when the client gives up on it, or the
 * stream's error.
 */
export class ResumingWatch extends Watch {
  private readonly requests: LeanRequests;

  constructor(
    config: KubeConfig,
    private readonly opts: ResumingWatchOptions,
  ) {
    super(config);
    this.requests = new LeanRequests(PooledKubeConfig.of(config));
    if (!(opts.maxTimeoutSeconds >= 1 && opts.maxTimeoutSeconds <= DEFAULT_WATCH_TIMEOUT_SECONDS)) {
      throw new RangeError(`watchTimeoutSeconds must be 1..${DEFAULT_WATCH_TIMEOUT_SECONDS} (a quiet watch's first bookmark comes 2 s before its timeout, and a watch is given up on 5 s after it), got ${opts.maxTimeoutSeconds}`);
    }
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    // Spread so that informers (and replicas) started together do not reconnect in step.
    const timeoutSeconds = Math.max(1, Math.round(this.opts.maxTimeoutSeconds * (0.8 + 0.2 * Math.random())));
    this.opts.onWatch?.(String(queryParams.resourceVersion ?? ''));
    const controller = new AbortController();
    // A connection gone silent (no bookmark, no end) is given up on soon after the watch's timeout.
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException(`the apiserver did not end a ${timeoutSeconds} s watch`, 'TimeoutError'));
    }, timeoutSeconds * 1000 + WATCH_END_GRACE_MS);
    deadline.unref();
    let ended = false;
    const end = (err: unknown): void => {
      if (ended) return;
      ended = true;
      clearTimeout(deadline);
      // Timed out, the request fails with whatever undici makes of the abort: ListWatch is told why.
      done(err && timedOut ? (controller.signal.reason as unknown) : err);
      controller.abort();
    };
    const emit = (line: string): void => {
      try {
        const event = JSON.parse(line) as { type: string; object: unknown };
        callback(event.type, event.type === 'ERROR' || event.type === 'BOOKMARK' ? event.object : this.opts.transform(event.object), event);
      } catch {
        // client-node's Watch skips such a line too
      }
    };
    try {
      const query = { watch: true, ...queryParams, allowWatchBookmarks: true, timeoutSeconds };
      const { answer } = await this.requests.open({ method: 'GET', path, query }, controller.signal);
      if (answer.statusCode !== 200) {
        answer.body.destroy();
        throw Object.assign(new Error(STATUS_CODES[answer.statusCode] ?? `HTTP ${answer.statusCode}`), { statusCode: answer.statusCode });
      }
      const lines = new LineSplitter(emit);
      answer.body.on('data', (chunk: Buffer) => lines.push(chunk));
      answer.body.on('end', () => {
        lines.flush();
        end(null);
      });
      answer.body.on('error', end);
      answer.body.on('close', () => end(null));
    } catch (err) {
      end(err);
    }
    return controller;
  }
}

/** Cuts a byte stream into lines (a watch answer: one JSON event per line) without copying a chunk more than once. */
export class LineSplitter {
  private pending: Buffer[] = [];

  constructor(private readonly line: (text: string) => void) {}

  push(chunk: Buffer): void {
    let from = 0;
    for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, from)) {
      const piece = chunk.subarray(from, at);
      if (this.pending.length > 0) {
        this.pending.push(piece);
        this.emit(Buffer.concat(this.pending).toString('utf8'));
        this.pending = [];
      } else this.emit(piece.toString('utf8'));
      from = at + 1;
    }
    if (from < chunk.length) this.pending.push(chunk.subarray(from));
  }

  /** The stream ended: a last line without its newline is a line too. */
  flush(): void {
    if (this.pending.length === 0) return;
    const rest = Buffer.concat(this.pending).toString('utf8');
    this.pending = [];
    this.emit(rest);
  }

  private emit(text: string): void {
    // Whitespace only is no line (a test for one non-space character: no trimmed copy of every event).
    if (/\S/.test(text)) this.line(text);
  }
}

const NEWLINE = 0x0a;

function toPlain<T>(obj: T): T {
  return JSON.parse(JSON.stringify(obj)) as T;
}

const READ_ANNOTATIONS: ReadonlySet<string> = new Set(Object.values(NodeAnnotation));

/**
 * A node cut to what the controller reads, for the node cache and the copies its own writes and
 * live reads return: name, uid, resourceVersion, creation and deletion times, labels, the
 * annotations it reads (NodeAnnotation), ownerReferences (a Karpenter NodeClaim), taints, providerID, the condition of type
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
  // Only the annotations the controller reads: a CNI's, a CSI driver's and Karpenter's own are
  // hundreds of bytes per node.
  const annotations = Object.entries(m.annotations ?? {}).filter(([key]) => READ_ANNOTATIONS.has(key));
  if (annotations.length) metadata.annotations = Object.fromEntries(annotations);
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
