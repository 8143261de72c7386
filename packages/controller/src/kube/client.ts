import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  type KubeConfig,
  PatchStrategy,
  VersionApi,
  type CoreV1Event,
  type V1ConfigMap,
  type V1EndpointSlice,
  type V1Node,
  type V1NodeList,
  type V1Pod,
  type V1PodList,
  type KubernetesListObject,
} from '@kubernetes/client-node';
import pRetry, { AbortError } from 'p-retry';
import { TerminalError, type Logger } from '@kube-node-ready/core';
import { NodeVerificationApi, type NodeVerification } from '../api/nodeverification.js';
import { FIELD_MANAGER } from '../api/well-known.js';
import type { Clock } from '../clock.js';
import { isAlreadyExists, isConflict, isNotFound, isTransient, messageOf } from './errors.js';
import { PooledKubeConfig } from './config.js';
import { WriteFence } from './fence.js';
import { apiPath, LeanRequests, type LeanRequest } from './lean.js';
import { Priority, PriorityTokenBucket } from './throttle.js';

/**
 * The API calls the controller makes, in one place: every call waits for a token of the client-side
 * rate limit (kubernetes.qps / burst) and is retried with p-retry on transient failures (429, 5xx,
 * network). Guarded writes are safe to retry: a repeat of an applied patch fails its `test`
 * operations and the caller re-reads. Writes go through write(), under the leadership fence
 * (kube/fence.ts); reads through read().
 *
 * These retries are the innermost of several layers, each for what the one below cannot do: the
 * watch resumes and the informer restarts (kube/informer.ts), a reconcile re-reads and decides again
 * on a conflict, the work queue's per-key backoff retries a reconcile that threw, and requeues and
 * the resync bring back time-based work. Nothing here retries what those retry: a non-transient
 * error is thrown at once. docs/architecture.md "Retries" says why each layer exists.
 */
export interface KubeClientOptions {
  qps: number;
  burst: number;
  clock: Clock;
  log: Logger;
  /** Retries of one call on transient errors. */
  retries?: number;
  /** Objects per page of a list (default LIST_PAGE_SIZE, client-go's 500; tests make it small). */
  listPageSize?: number;
  /** Told about every request (for metrics). */
  observer?: { request?(operation: string, ok: boolean): void; throttled?(seconds: number): void };
}

/** How one call waits for the rate limit. */
export interface CallOptions {
  /** Default Priority.Normal. */
  priority?: Priority;
}

export class KubeClient {
  readonly core: CoreV1Api;
  readonly coordination: CoordinationV1Api;
  private readonly discovery: DiscoveryV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly version: VersionApi;
  /** kubernetes.qps and burst, for every call (Events at Priority.BestEffort). */
  private readonly limiter: PriorityTokenBucket;
  /** Writes are refused once this aborts (see fenceWrites). */
  private writeFence: WriteFence | undefined;
  /** The calls made for every node, without client-node's typed layers (kube/lean.ts). */
  private readonly lean: LeanRequests;

  constructor(
    readonly kubeConfig: KubeConfig,
    private opts: KubeClientOptions,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    this.discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.version = kubeConfig.makeApiClient(VersionApi);
    this.lean = new LeanRequests(PooledKubeConfig.of(kubeConfig));
    this.limiter = new PriorityTokenBucket(opts.qps, opts.burst, opts.clock);
  }

  /** Reports every request from now on (the composition root wires metrics here). */
  observe(observer: NonNullable<KubeClientOptions['observer']>): void {
    this.opts = { ...this.opts, observer };
  }

  /** The API server URL, for messages. */
  get server(): string {
    return this.kubeConfig.getCurrentCluster()?.server ?? '(no cluster in kubeconfig)';
  }

  /** GET /version, once, no retries: the start-up reachability check. */
  async serverVersion(): Promise<string> {
    const info = await this.version.getCode();
    return info.gitVersion;
  }

  /**
   * From now on, every write (write()) runs only while `signal` has not aborted (kube/fence.ts). The
   * composition root fences writes with the leadership signal, so a replica that is not leading, or
   * has just lost its Lease, writes nothing more.
   */
  fenceWrites(signal: AbortSignal): void {
    this.writeFence = new WriteFence(signal);
  }

  /** Runs one call that changes nothing under the rate limit, retrying transient failures. Never fenced. */
  read<T>(what: string, fn: () => Promise<T>, opts: CallOptions = {}): Promise<T> {
    return this.attempts(what, fn, opts);
  }

  /**
   * Runs one call that changes the cluster (create, update, patch, delete) under the rate limit,
   * retrying transient failures, and under the write fence once fenceWrites() has set one.
   */
  async write<T>(what: string, fn: () => Promise<T>, opts: CallOptions = {}): Promise<T> {
    const fence = this.writeFence;
    if (!fence) return this.attempts(what, fn, opts);
    return fence.run(what, (refuse) => this.attempts(what, fn, opts, refuse));
  }

  /** The call with its retries; `refuse` is asked before each attempt is sent. */
  private attempts<T>(what: string, fn: () => Promise<T>, opts: CallOptions, refuse?: () => Error | false): Promise<T> {
    const priority = opts.priority ?? Priority.Normal;
    return pRetry(
      async () => {
        const queued = this.opts.clock.now();
        await this.limiter.acquire(priority);
        const waited = this.opts.clock.now() - queued;
        // Best-effort calls (Events) wait behind every other call by design: their wait says how busy
        // the others keep the budget, which the others' own waits already tell.
        if (waited > 0 && priority !== Priority.BestEffort) this.opts.observer?.throttled?.(waited / 1000);
        const refusal = refuse?.();
        if (refusal) throw new AbortError(refusal);
        try {
          const result = await fn();
          this.opts.observer?.request?.(what, true);
          return result;
        } catch (err) {
          this.opts.observer?.request?.(what, false);
          throw err;
        }
      },
      {
        retries: this.opts.retries ?? 3,
        minTimeout: 200,
        factor: 2,
        maxTimeout: 2_000,
        shouldRetry: ({ error }) => isTransient(error),
        onFailedAttempt: ({ error, attemptNumber, retriesLeft }) => {
          if (isTransient(error) && retriesLeft > 0) {
            this.opts.log.debug({ call: what, attempt: attemptNumber, err: messageOf(error) }, 'API call failed, retrying');
          }
        },
      },
    );
  }

  /** Every page of a list, each asked for with `limit` and the previous page's continue token. */
  private async *pages<L extends { metadata?: ListMeta }>(operation: string, list: (page: { limit: number; _continue?: string }) => Promise<L>): AsyncGenerator<L> {
    let token: string | undefined;
    do {
      const page = { limit: this.opts.listPageSize ?? LIST_PAGE_SIZE, ...(token ? { _continue: token } : {}) };
      const result = await this.read(operation, () => list(page));
      token = result.metadata?._continue ?? result.metadata?.continue;
      yield result;
    } while (token);
  }

  // -- Any object ----------------------------------------------------------------------------

  /**
   * Whether the API server has the object, or serves the collection, at `path` (apiPath()): a GET,
   * false on 404; any other failure (a 403 too) is thrown. The start-up check of the worker's
   * prerequisites (controllers/node/verification/prerequisites.ts).
   */
  async exists(operation: string, path: string, query?: LeanRequest['query']): Promise<boolean> {
    try {
      await this.read(operation, () => this.lean.send({ method: 'GET', path, ...(query ? { query } : {}) }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  // -- Nodes ---------------------------------------------------------------------------------

  /**
   * Every node (matching `labelSelector`), in pages of LIST_PAGE_SIZE like client-go's reflector: a
   * large cluster is never one huge response, and the caller keeps what it needs of each page.
   */
  listNodePages(labelSelector?: string): AsyncGenerator<V1NodeList> {
    return this.pages('list nodes', (page) => this.core.listNode({ ...page, ...(labelSelector ? { labelSelector } : {}) }));
  }

  /** The node of that name if it exists and matches `labelSelector`: one live list, filtered by name. */
  async findNode(name: string, labelSelector?: string): Promise<V1Node | undefined> {
    const list = await this.read('list nodes', () => this.core.listNode({ fieldSelector: `metadata.name=${name}`, ...(labelSelector ? { labelSelector } : {}) }));
    return list.items[0];
  }

  async getNode(name: string): Promise<V1Node | undefined> {
    try {
      return await this.read('get node', () => this.lean.json<V1Node>({ method: 'GET', path: apiPath('api/v1/nodes', name) }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** RFC 6902 JSON patch. High priority for writes that record a finished attempt. */
  patchNode(name: string, ops: readonly object[], priority: Priority = Priority.Normal): Promise<V1Node> {
    return this.write(
      'patch node',
      () => this.lean.json<V1Node>({ method: 'PATCH', path: apiPath('api/v1/nodes', name), query: { fieldManager: FIELD_MANAGER }, body: ops, contentType: PatchStrategy.JsonPatch }),
      { priority },
    );
  }

  /** Strategic-merge patch of nodes/status (conditions merge by type). */
  async patchNodeStatus(name: string, body: object): Promise<void> {
    await this.write('patch node status', () =>
      this.lean.send({ method: 'PATCH', path: apiPath('api/v1/nodes', name, 'status'), query: { fieldManager: FIELD_MANAGER }, body, contentType: PatchStrategy.StrategicMergePatch }),
    );
  }

  // -- NodeVerifications (api/nodeverification.ts) ------------------------------------------

  /** Every NodeVerification, in pages of LIST_PAGE_SIZE. */
  listNodeVerificationPages(): AsyncGenerator<KubernetesListObject<NodeVerification>> {
    return this.pages('list nodeverifications', async (page) => (await this.custom.listClusterCustomObject({ ...NV, ...page })) as KubernetesListObject<NodeVerification>);
  }

  /**
   * Fails with what to do when the API server does not serve NodeVerifications (the CRD was not
   * installed: Helm installs it only with the first `helm install`).
   */
  async requireNodeVerifications(): Promise<void> {
    try {
      await this.read('list nodeverifications', () => this.custom.listClusterCustomObject({ ...NV, limit: 1 }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
      throw new TerminalError(
        `the NodeVerification CRD (${NV.plural}.${NV.group}) is not installed, or not at ${NV.version}: apply deploy/helm/kube-node-ready/crds/ ` +
          '(`helm show crds <chart> | kubectl apply --server-side -f -`; docs/upgrading.md), then start the controller again',
        { cause: err },
      );
    }
  }

  async getNodeVerification(name: string): Promise<NodeVerification | undefined> {
    try {
      return await this.read('get nodeverification', () => this.lean.json<NodeVerification>({ method: 'GET', path: apiPath(NV_PATH, name) }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Creates it, with its status: the CRD has no status subresource (ADR 0006), so one request
   * records a verdict. AlreadyExists is the caller's to handle. Fails with what to do when the CRD
   * installed is an earlier version's, whose status subresource drops the status on create.
   */
  async createNodeVerification(nv: NodeVerification, priority: Priority = Priority.Normal): Promise<NodeVerification> {
    const created = await this.write('create nodeverification', () => this.lean.json<NodeVerification>({ method: 'POST', path: apiPath(NV_PATH), query: { fieldManager: FIELD_MANAGER }, body: nv }), { priority });
    if (nv.status !== undefined && created.status === undefined) {
      throw new TerminalError(
        `the NodeVerification CRD installed (${NV.plural}.${NV.group}) is an earlier version's, with a status subresource: the API server dropped the status of NodeVerification ${nv.metadata?.name ?? ''} on create. ` +
          'Apply this version\'s CRD: kubectl apply -f deploy/helm/kube-node-ready/crds/ (Helm never upgrades CRDs; docs/upgrading.md)',
      );
    }
    return created;
  }

  /**
   * Replaces `nv`, its status included, guarded by its metadata.resourceVersion: 409 Conflict when
   * anyone wrote it since (isConflict), 404 when it is gone.
   */
  async updateNodeVerification(nv: NodeVerification, priority: Priority = Priority.Normal): Promise<NodeVerification> {
    const name = nv.metadata?.name ?? '';
    return this.write('update nodeverification', () => this.lean.json<NodeVerification>({ method: 'PUT', path: apiPath(NV_PATH, name), query: { fieldManager: FIELD_MANAGER }, body: nv }), {
      priority,
    });
  }

  /** Deletes it if it is still the object of that UID (a precondition); one already gone is fine. */
  async deleteNodeVerification(name: string, uid: string): Promise<void> {
    try {
      await this.write('delete nodeverification', () => this.lean.send({ method: 'DELETE', path: apiPath(NV_PATH, name), body: { preconditions: { uid } } }));
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }

  // -- Worker pods -----------------------------------------------------------------------------

  /** The pods (one page: the worker namespace holds at most a few hundred). */
  async *listPodPages(namespace: string, labelSelector: string): AsyncGenerator<V1PodList> {
    yield await this.read('list pods', () => this.core.listNamespacedPod({ namespace, labelSelector }));
  }

  /** Creates the pod; if a pod of that name exists already (same attempt), returns undefined. */
  async createPod(pod: V1Pod): Promise<V1Pod | undefined> {
    try {
      const namespace = pod.metadata?.namespace ?? 'default';
      return await this.write('create pod', () => this.lean.json<V1Pod>({ method: 'POST', path: apiPath('api/v1/namespaces', namespace, 'pods'), query: { fieldManager: FIELD_MANAGER }, body: pod }));
    } catch (err) {
      if (isAlreadyExists(err)) return undefined;
      throw err;
    }
  }

  async getPod(namespace: string, name: string): Promise<V1Pod | undefined> {
    try {
      return await this.read('get pod', () => this.lean.json<V1Pod>({ method: 'GET', path: apiPath('api/v1/namespaces', namespace, 'pods', name) }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Deletes the pod (background propagation); a pod already gone is fine. */
  async deletePod(namespace: string, name: string): Promise<void> {
    try {
      await this.write('delete pod', () => this.lean.send({ method: 'DELETE', path: apiPath('api/v1/namespaces', namespace, 'pods', name), query: { gracePeriodSeconds: 0, propagationPolicy: 'Background' } }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  // -- API server endpoints -------------------------------------------------------------------

  /** EndpointSlices matching `labelSelector` in one namespace (the `kubernetes` Service's: a handful of objects). */
  async listEndpointSlices(namespace: string, labelSelector: string): Promise<V1EndpointSlice[]> {
    const list = await this.read('list endpointslices', () => this.discovery.listNamespacedEndpointSlice({ namespace, labelSelector }));
    return list.items;
  }

  // -- Worker ConfigMap ------------------------------------------------------------------------

  /** Makes the ConfigMap hold exactly `data`: read, then create or (only if different) update. */
  async applyConfigMap(namespace: string, name: string, data: Record<string, string>, labels: Record<string, string>): Promise<'created' | 'updated' | 'unchanged'> {
    const body: V1ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels }, data };
    let current: V1ConfigMap | undefined;
    try {
      current = await this.read('get configmap', () => this.core.readNamespacedConfigMap({ namespace, name }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!current) {
      await this.write('create configmap', () => this.core.createNamespacedConfigMap({ namespace, body, fieldManager: FIELD_MANAGER }));
      return 'created';
    }
    if (JSON.stringify(current.data ?? {}) === JSON.stringify(data)) return 'unchanged';
    // Keep what others put on it (the Helm chart renders this ConfigMap too: its labels and annotations).
    const replacement: V1ConfigMap = {
      ...body,
      metadata: { ...body.metadata, labels: { ...current.metadata?.labels, ...labels }, annotations: current.metadata?.annotations, resourceVersion: current.metadata?.resourceVersion ?? '' },
    };
    await this.write('update configmap', () => this.core.replaceNamespacedConfigMap({ namespace, name, body: replacement, fieldManager: FIELD_MANAGER }));
    return 'updated';
  }

  // -- Events ----------------------------------------------------------------------------------
  // Best effort (Priority.BestEffort): they wait for the same budget as every other call, but behind
  // all of them, so they never hold up a node's call that waits.

  async createEvent(namespace: string, event: CoreV1Event): Promise<void> {
    await this.write('create event', () => this.lean.send({ method: 'POST', path: apiPath('api/v1/namespaces', namespace, 'events'), body: event }), { priority: Priority.BestEffort });
  }

  async bumpEvent(namespace: string, name: string, count: number, lastTimestamp: string): Promise<void> {
    await this.write(
      'patch event',
      () => this.lean.send({ method: 'PATCH', path: apiPath('api/v1/namespaces', namespace, 'events', name), body: { count, lastTimestamp }, contentType: PatchStrategy.MergePatch }),
      { priority: Priority.BestEffort },
    );
  }
}

/** The NodeVerification resource's coordinates, as CustomObjectsApi takes them, and its collection's path. */
const NV = { group: NodeVerificationApi.group, version: NodeVerificationApi.version, plural: NodeVerificationApi.plural };
const NV_PATH = `apis/${NV.group}/${NV.version}/${NV.plural}`;

/**
 * A list's metadata: client-node's typed lists carry the continue token as `_continue`; the custom
 * objects API returns the JSON as sent, where it is `continue`.
 */
type ListMeta = { _continue?: string; continue?: string };

/** Objects per page of a list (client-go's pager uses 500). */
const LIST_PAGE_SIZE = 500;
