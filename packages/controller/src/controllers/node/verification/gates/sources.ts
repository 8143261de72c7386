import { AppsV1Api, CoreV1Api, StorageV1Api, type KubernetesListObject, type KubernetesObject, type V1CSINode, type V1DaemonSet, type V1LabelSelector, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import type { Clock } from '../../../../clock.js';
import type { KubeClient } from '../../../../kube/client.js';
import { SelfHealingInformer, type InformerOptions } from '../../../../kube/informer.js';
import type { GatesConfig } from './config.js';
import { isPodReady, requiredDaemonSets, type GateInputs } from './evaluate.js';

/**
 * The caches the readiness gates read (evaluate.ts GateInputs), and the watch events that wake a
 * node whose gates may have changed:
 *
 * - the DaemonSets of each namespace a gate names (one informer per namespace, not cluster-wide),
 *   cut to what placement reads (slimDaemonSet);
 * - the pods of each required DaemonSet only: one informer per DaemonSet, in its namespace, with the
 *   DaemonSet's own .spec.selector as label selector, so the cache holds about one pod per node per
 *   required DaemonSet and never the cluster's other pods; cut to their node, owner, readiness
 *   (slimGatePod) and indexed by spec.nodeName. Started when the DaemonSet appears in the cache,
 *   stopped when it goes (or no gate requires it any more). A pod whose node, readiness or deletion
 *   changes wakes its node;
 * - the CSINodes (cluster-scoped, one per node, cut to their driver names), only when a gate names
 *   a CSI driver: one whose drivers change wakes its node (a CSINode is named after its node).
 *
 * A change to the set of required DaemonSets or to where one runs (its labels, selector, template's
 * node selection and tolerations) may change any node's gates: wakeAll(). So does the first list of
 * a DaemonSet's pods (nodes waiting for it to be listed). Node allocatable changes come with the node
 * watch, not from here.
 */
export interface GateSourcesOptions {
  kube: Pick<KubeClient, 'kubeConfig' | 'read'>;
  clock: Clock;
  log: Logger;
  /** The gates of every profile, the top level's included: what to watch is their union. */
  gates: ReadonlyArray<Pick<GatesConfig, 'requireDaemonSets' | 'requireCSIDrivers'>>;
  /** Hooks of each informer by resource ("daemonsets", "pods", "csinodes"): the composition root's metrics. */
  hooks?: (resource: string) => Pick<InformerOptions<KubernetesObject>, 'onRestart' | 'onList' | 'onListed'>;
  /** Objects per page of a list (default 500, as KubeClient's). */
  listPageSize?: number;
  /** Shorter watches, for tests. */
  watchTimeoutSeconds?: number;
}

interface PodSource {
  informer: SelfHealingInformer<V1Pod>;
  /** Each pod's node, readiness and deletion, as last seen: only a change wakes its node. */
  seen: Map<string, string>;
}

/** Who is told that gate inputs changed (GateSources.on). */
export interface GateHandlers {
  /** A node whose gate inputs changed. */
  wake: (node: string) => void;
  /** Any node's gate inputs may have changed. */
  wakeAll: () => void;
}

export class GateSources implements GateInputs {
  private readonly handlers: GateHandlers[] = [];
  private readonly daemonSetInformers = new Map<string, SelfHealingInformer<V1DaemonSet>>();
  private readonly csiNodes: SelfHealingInformer<V1CSINode> | undefined;
  /** Pod informers by the uid of the DaemonSet whose pods they watch. */
  private readonly podSources = new Map<string, PodSource>();
  private readonly csiSeen = new Map<string, string>();
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly refs: GatesConfig['requireDaemonSets'];
  /** What the required DaemonSets were at the last look (requiredFingerprint). */
  private required = '';
  private started = false;
  private stopped = false;

  constructor(private readonly opts: GateSourcesOptions) {
    this.apps = opts.kube.kubeConfig.makeApiClient(AppsV1Api);
    this.core = opts.kube.kubeConfig.makeApiClient(CoreV1Api);
    this.refs = opts.gates.flatMap((g) => g.requireDaemonSets);
    for (const namespace of new Set(this.refs.map((r) => r.namespace))) {
      const informer = new SelfHealingInformer<V1DaemonSet>({
        ...this.common('daemonsets'),
        path: `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
        list: () => this.pages('list daemonsets', (page) => this.apps.listNamespacedDaemonSet({ namespace, ...page })),
        transform: slimDaemonSet,
      });
      const changed = (): void => this.daemonSetsChanged();
      informer.on({ add: changed, update: changed, delete: changed });
      this.daemonSetInformers.set(namespace, informer);
    }
    if (opts.gates.some((g) => g.requireCSIDrivers.length > 0)) {
      const storage = opts.kube.kubeConfig.makeApiClient(StorageV1Api);
      const csiNodes = (this.csiNodes = new SelfHealingInformer<V1CSINode>({
        ...this.common('csinodes'),
        path: '/apis/storage.k8s.io/v1/csinodes',
        list: () => this.pages('list csinodes', (page) => storage.listCSINode(page)),
        transform: slimCsiNode,
      }));
      const seen = (csi: V1CSINode): void => {
        const node = csi.metadata?.name ?? '';
        const drivers = driverNames(csi).join(',');
        if (this.csiSeen.get(node) === drivers) return;
        this.csiSeen.set(node, drivers);
        this.wake(node);
      };
      csiNodes.on({
        add: seen,
        update: seen,
        delete: (csi) => {
          this.csiSeen.delete(csi.metadata?.name ?? '');
          this.wake(csi.metadata?.name ?? '');
        },
      });
    }
  }

  /** Tells `handlers` of every change of gate inputs from now on (register before start()). */
  on(handlers: GateHandlers): void {
    this.handlers.push(handlers);
  }

  private wake(node: string): void {
    for (const h of this.handlers) h.wake(node);
  }

  private wakeAll(): void {
    for (const h of this.handlers) h.wakeAll();
  }

  /** Lists and watches the DaemonSets and CSINodes; resolves once they are listed. The pods of each required DaemonSet are listed after it is seen, not awaited here. */
  async start(): Promise<void> {
    await Promise.all([...this.daemonSetInformers.values(), ...(this.csiNodes ? [this.csiNodes] : [])].map((i) => i.start()));
    this.started = true;
    this.daemonSetsChanged();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const informers = [...this.daemonSetInformers.values(), ...(this.csiNodes ? [this.csiNodes] : []), ...[...this.podSources.values()].map((s) => s.informer)];
    this.podSources.clear();
    await Promise.all(informers.map((i) => i.stop()));
  }

  /** Whether the DaemonSets and CSINodes have been listed (the pods of each required DaemonSet follow). */
  hasSynced(): boolean {
    return [...this.daemonSetInformers.values(), ...(this.csiNodes ? [this.csiNodes] : [])].every((i) => i.hasSynced());
  }

  /** Not ok while any of its informers is not (kube/informer.ts health). */
  health(): { ok: boolean; reason?: string } {
    const informers = [...this.daemonSetInformers.values(), ...(this.csiNodes ? [this.csiNodes] : []), ...[...this.podSources.values()].map((s) => s.informer)];
    return informers.map((i) => i.health()).find((h) => !h.ok) ?? { ok: true };
  }

  // -- GateInputs ------------------------------------------------------------------------------

  daemonSets(namespace: string): readonly V1DaemonSet[] | undefined {
    const informer = this.daemonSetInformers.get(namespace);
    return informer?.hasSynced() ? informer.list(namespace) : undefined;
  }

  daemonSetPods(ds: V1DaemonSet, node: string): readonly V1Pod[] | undefined {
    const uid = ds.metadata?.uid ?? '';
    const source = this.podSources.get(uid);
    if (!source?.informer.hasSynced()) return undefined;
    return source.informer.byIndex(node).filter((pod) => (pod.metadata?.ownerReferences ?? []).some((o) => o.controller && o.uid === uid));
  }

  csiDrivers(node: string): readonly string[] | undefined {
    const csi = this.csiNodes?.get(node);
    return csi ? driverNames(csi) : undefined;
  }

  // -------------------------------------------------------------------------------------------

  /**
   * A DaemonSet event: the pods of every required DaemonSet are watched, no others; and when the
   * required set or where one of them runs changed, every node's gates may have.
   */
  private daemonSetsChanged(): void {
    if (!this.started || this.stopped) return;
    const { found } = requiredDaemonSets(this.refs, this);
    const wanted = new Map(found.map(({ ds }) => [ds.metadata?.uid ?? '', ds]));
    for (const [uid, source] of this.podSources) {
      if (wanted.has(uid)) continue;
      this.podSources.delete(uid);
      source.informer.stop().catch((err: unknown) => this.opts.log.warn({ err: String(err) }, 'could not stop a DaemonSet pod watch'));
    }
    for (const [uid, ds] of wanted) if (!this.podSources.has(uid)) this.watchPods(uid, ds);
    const fingerprint = JSON.stringify(found.map(({ ds }) => [ds.metadata?.uid, ds.metadata?.labels, ds.spec]).sort());
    if (fingerprint === this.required) return;
    const first = this.required === '';
    this.required = fingerprint;
    if (!first) this.wakeAll();
  }

  private watchPods(uid: string, ds: V1DaemonSet): void {
    const namespace = ds.metadata?.namespace ?? '';
    const labelSelector = selectorString(ds.spec?.selector);
    const hooks = this.opts.hooks?.('pods');
    let listed = false;
    const informer = new SelfHealingInformer<V1Pod>({
      ...this.common('pods'),
      path: `/api/v1/namespaces/${namespace}/pods`,
      list: () => this.pages('list pods', (page) => this.core.listNamespacedPod({ namespace, ...(labelSelector ? { labelSelector } : {}), ...page })),
      ...(labelSelector ? { labelSelector } : {}),
      transform: slimGatePod,
      indexBy: (pod) => pod.spec?.nodeName || undefined,
      onListed: () => {
        hooks?.onListed?.();
        // Nodes that waited for this DaemonSet's pods to be listed.
        if (!listed) this.wakeAll();
        listed = true;
      },
    });
    const source: PodSource = { informer, seen: new Map() };
    const seen = (pod: V1Pod): void => {
      if (this.podSources.get(uid) !== source) return;
      const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
      const node = pod.spec?.nodeName ?? '';
      const state = `${node}|${isPodReady(pod)}|${Boolean(pod.metadata?.deletionTimestamp)}`;
      if (source.seen.get(key) === state) return;
      source.seen.set(key, state);
      if (node) this.wake(node);
    };
    informer.on({
      add: seen,
      update: seen,
      delete: (pod) => {
        source.seen.delete(`${pod.metadata?.namespace}/${pod.metadata?.name}`);
        if (pod.spec?.nodeName && this.podSources.get(uid) === source) this.wake(pod.spec.nodeName);
      },
    });
    this.podSources.set(uid, source);
    this.opts.log.debug({ daemonSet: `${namespace}/${ds.metadata?.name}`, labelSelector }, 'watching the pods of a required DaemonSet');
    informer.start().catch((err: unknown) => this.opts.log.warn({ err: String(err) }, 'could not start a DaemonSet pod watch'));
  }

  private common(resource: string) {
    return {
      resource,
      kubeConfig: this.opts.kube.kubeConfig,
      clock: this.opts.clock,
      log: this.opts.log,
      ...this.opts.hooks?.(resource),
      ...(this.opts.watchTimeoutSeconds ? { watchTimeoutSeconds: this.opts.watchTimeoutSeconds } : {}),
    };
  }

  /** Every page of a list, through the client's rate limit and retries. */
  private async *pages<L extends KubernetesListObject<KubernetesObject>>(operation: string, list: (page: { limit: number; _continue?: string }) => Promise<L>): AsyncGenerator<L> {
    let token: string | undefined;
    do {
      const page = { limit: this.opts.listPageSize ?? 500, ...(token ? { _continue: token } : {}) };
      const result = await this.opts.kube.read(operation, () => list(page));
      token = result.metadata?._continue;
      yield result;
    } while (token);
  }
}

/**
 * A DaemonSet cut to what the gates read: name, namespace, uid, labels (selector entries), its pod
 * selector (the pod watch), and of its pod template only what decides where it runs: nodeName,
 * nodeSelector, required node affinity, tolerations, hostNetwork. No status: it changes with every
 * pod, and would make each of those an update to compare.
 */
export function slimDaemonSet(ds: V1DaemonSet): V1DaemonSet {
  const m = ds.metadata ?? {};
  const t = ds.spec?.template?.spec;
  const required = t?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  return {
    metadata: defined({ name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion, labels: m.labels }),
    spec: {
      selector: ds.spec?.selector ?? {},
      template: {
        spec: {
          containers: [],
          ...defined({ nodeName: t?.nodeName, nodeSelector: t?.nodeSelector, tolerations: t?.tolerations, hostNetwork: t?.hostNetwork }),
          ...(required ? { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: required } } } : {}),
        },
      },
    },
  };
}

/** A required DaemonSet's pod cut to its name, controller, node, deletion, phase and Ready condition. */
export function slimGatePod(pod: V1Pod): V1Pod {
  const m = pod.metadata ?? {};
  const owner = (m.ownerReferences ?? []).filter((o) => o.controller);
  const ready = (pod.status?.conditions ?? []).filter((c) => c.type === 'Ready').map((c) => defined({ type: c.type, status: c.status, reason: c.reason }));
  return {
    metadata: defined({ name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion, deletionTimestamp: m.deletionTimestamp, ...(owner.length ? { ownerReferences: owner } : {}) }),
    spec: { containers: [], ...defined({ nodeName: pod.spec?.nodeName }) },
    status: defined({ phase: pod.status?.phase, ...(ready.length ? { conditions: ready } : {}) }),
  };
}

/** A CSINode cut to its name (its node's) and its drivers' names and node IDs. */
export function slimCsiNode(csi: V1CSINode): V1CSINode {
  const m = csi.metadata ?? {};
  return {
    metadata: defined({ name: m.name, uid: m.uid, resourceVersion: m.resourceVersion }),
    spec: { drivers: (csi.spec?.drivers ?? []).map((d) => ({ name: d.name, nodeID: d.nodeID })) },
  };
}

/** A metav1.LabelSelector in the API's string form (`a=b,c in (d,e),!f`), as a watch takes it. */
export function selectorString(selector: V1LabelSelector | undefined): string {
  const parts = Object.entries(selector?.matchLabels ?? {}).map(([key, value]) => `${key}=${value}`);
  for (const { key, operator, values = [] } of selector?.matchExpressions ?? []) {
    if (operator === 'In') parts.push(`${key} in (${values.join(',')})`);
    else if (operator === 'NotIn') parts.push(`${key} notin (${values.join(',')})`);
    else if (operator === 'Exists') parts.push(key);
    else if (operator === 'DoesNotExist') parts.push(`!${key}`);
  }
  return parts.join(',');
}

function driverNames(csi: V1CSINode): string[] {
  return (csi.spec?.drivers ?? []).map((d) => d.name).sort();
}

/** `obj` without its undefined fields (the cache keeps plain JSON; exactOptionalPropertyTypes). */
function defined<T extends object>(obj: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as { [K in keyof T]: Exclude<T[K], undefined> };
}
