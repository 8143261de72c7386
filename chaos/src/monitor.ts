// The invariant monitor: watches the scenario's Nodes, their NodeVerifications and the worker Pods
// with the sandbox's admin credentials, straight to the apiserver (never through the fault proxy the
// controller talks to), and records what it needs to judge the invariants afterwards and while they happen:
//   - every Node by UID: its faults (sandbox annotations), when it opened, when it was deleted,
//     when it could first run a worker, each change of the controller's node condition (final
//     verdicts), and each change of the progress and condition in the NodeVerification written for
//     that UID (what a user would have seen with kubectl, and when);
//   - every worker Pod: the node name and UID it verifies, when it was live, how it ended;
//   - live worker pods per node name at every pod event (duplicates are seen as they happen).
// Watches re-list after any error; the time without a pod watch is kept, because a pod that passed
// and was deleted inside such a gap cannot be seen (the opening is then "unconfirmed", not wrong).
// Node Events are listed once, at the end (nodeEvents()), for the scenarios that judge them; the
// leader-election Lease is read every second (who leads, since when).
import { FAULT, k8s } from '@kube-node-ready/sandbox';
import { NODE_NAME_ANNOTATION, WORKER_SELECTOR } from '../../bench/src/observer.js';
import { NodeVerificationApi, VERIFIED_CONDITION, type NodeVerification, type NodeVerificationStatus } from '../../packages/controller/src/api/nodeverification.js';

const POD_NODE_UID = 'kube-node-ready.io/node-uid';
/** Taints every worker tolerates (besides the verification taint): the node lifecycle controller's, which the Ready condition says first. */
const WORKER_TOLERATES = new Set(['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']);

/** The node a worker pod verifies (full name, from its annotation). */
export const workerNode = (p: k8s.V1Pod): string | undefined => p.metadata?.annotations?.[NODE_NAME_ANNOTATION];

const finished = (p: k8s.V1Pod) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';

/** A worker pod that exists, is not being deleted and has not finished. */
export const isLive = (p: k8s.V1Pod): boolean => !p.metadata?.deletionTimestamp && !finished(p);

export type Fault = 'dns' | 'garbage' | 'never-start';

export interface NodeRecord {
  name: string;
  uid: string;
  /** Faults the node was created with: its worker can never pass. */
  faults: Fault[];
  firstSeen: number;
  /** First time seen without the verification taint or with the verified label. */
  opened?: number;
  deleted?: number;
  /**
   * First time seen able to run a worker: Ready, and no NoSchedule/NoExecute taint the worker does
   * not tolerate (a CNI agent's startup taint, say). The verification taint does not count.
   */
  launchable?: number;
  /** Each change of whether the node can run a worker (as for `launchable`), starting with its first state. */
  canRun: Array<{ t: number; can: boolean }>;
  /** Each change of the condition in its NodeVerification (type Verified: every step, waiting and verifying included), as seen. */
  conditions: ConditionSeen[];
  /** Each change of the controller's node condition (nodeManagement.condition.type: final verdicts only), as seen. */
  nodeConditions: ConditionSeen[];
  /** Each change of the progress in its NodeVerification (phase, attempt, failures), as seen. */
  progress: ProgressSeen[];
  /** The node as last seen (for foreign keys). */
  last: k8s.V1Node;
  /** The status of its NodeVerification as last seen (one written for this UID; kept after the NodeVerification is deleted). */
  verification?: NodeVerificationStatus;
}

export interface ConditionSeen {
  t: number;
  status: string;
  reason: string;
  message: string;
}

export interface ProgressSeen {
  t: number;
  phase?: string;
  attempt?: number;
  failures?: number;
}

export interface PodRecord {
  name: string;
  uid: string;
  node: string;
  nodeUid: string;
  created: number;
  /** The pod ended with exit code 0 (the worker's verdict "passed"). */
  exitedZero: boolean;
  terminal?: number;
  deleted?: number;
}

export interface Duplicate {
  t: number;
  node: string;
  pods: string[];
}

export class Monitor {
  readonly nodes = new Map<string, NodeRecord>();
  readonly pods = new Map<string, PodRecord>();
  readonly duplicates: Duplicate[] = [];
  /** Node deletions: UID -> time. */
  readonly deletions = new Map<string, number>();
  /** [start, end] of periods the pod watch was down (end undefined while down). */
  readonly podWatchGaps: Array<[number, number | undefined]> = [];
  readonly errors: string[] = [];
  /** Each change of the Lease's holder, as seen: a new leader's term starts at `t`. */
  readonly leaderTerms: Array<{ t: number; holder: string }> = [];
  private readonly livePods = new Map<string, Map<string, k8s.V1Pod>>();
  /** NodeVerifications seen before their Node (by node UID, with when): applied once the Node is seen. */
  private readonly early = new Map<string, Array<{ t: number; nv: NodeVerification }>>();
  private stopped = false;
  private readonly aborts = new Set<AbortController>();

  constructor(
    private readonly kc: k8s.KubeConfig,
    private readonly opts: { nodeSelector: string; namespace: string; taintKey: string; verifiedLabel: string; conditionType: string; lease: string },
  ) {}

  async start(): Promise<void> {
    void this.pollLease();
    const core = this.kc.makeApiClient(k8s.CoreV1Api);
    const custom = this.kc.makeApiClient(k8s.CustomObjectsApi);
    const { group, version, plural } = NodeVerificationApi;
    await Promise.all([
      this.watchLoop('/api/v1/nodes', { labelSelector: this.opts.nodeSelector }, () => core.listNode({ labelSelector: this.opts.nodeSelector }), (t, n) => this.onNode(t, n), undefined),
      // Every NodeVerification (they carry no labels of the run): those of other nodes are never applied.
      this.watchLoop(
        NodeVerificationApi.path,
        {},
        async () => (await custom.listClusterCustomObject({ group, version, plural })) as { items: NodeVerification[]; metadata?: { resourceVersion?: string } },
        (t, nv: NodeVerification) => this.onVerification(t, nv),
        undefined,
      ),
      this.watchLoop(
        `/api/v1/namespaces/${this.opts.namespace}/pods`,
        { labelSelector: WORKER_SELECTOR },
        () => core.listNamespacedPod({ namespace: this.opts.namespace, labelSelector: WORKER_SELECTOR }),
        (t, p) => this.onPod(t, p),
        this.podWatchGaps,
      ),
    ]);
  }

  stop(): void {
    this.stopped = true;
    for (const a of this.aborts) a.abort();
  }

  nodeByName(name: string): NodeRecord | undefined {
    let found: NodeRecord | undefined;
    for (const n of this.nodes.values()) if (n.name === name && n.deleted === undefined) found = n;
    return found;
  }

  /** When the term of the leader that led at `t` began (undefined: no leader seen by then). */
  leaderSince(t: number): number | undefined {
    let since: number | undefined;
    for (const term of this.leaderTerms) if (term.t <= t) since = term.holder ? term.t : undefined;
    return since;
  }

  private async pollLease(): Promise<void> {
    const coord = this.kc.makeApiClient(k8s.CoordinationV1Api);
    while (!this.stopped) {
      try {
        const lease = await coord.readNamespacedLease({ name: this.opts.lease, namespace: this.opts.namespace });
        const holder = lease.spec?.holderIdentity ?? '';
        if (holder !== this.leaderTerms.at(-1)?.holder) this.leaderTerms.push({ t: Date.now(), holder });
      } catch {
        // The apiserver may be down (a scenario's fault): the last holder seen stands until the next read.
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** How long the node could not run a worker between its first sighting and `until`, as seen. */
  static cannotRunMs(n: NodeRecord, until: number): number {
    let total = 0;
    n.canRun.forEach((s, i) => {
      const end = Math.min(n.canRun[i + 1]?.t ?? until, until);
      if (!s.can && end > s.t) total += end - s.t;
    });
    return total;
  }

  /** Was the pod watch down at any time within [from, to]? */
  podWatchGapWithin(from: number, to: number): boolean {
    return this.podWatchGaps.some(([s, e]) => s <= to && (e ?? Infinity) >= from);
  }

  /**
   * Core/v1 Events about the run's Nodes (namespace default, where the controller records them,
   * as the kubelet does), listed page by page. Events are best effort: a missing one is not proof.
   */
  async nodeEvents(): Promise<k8s.CoreV1Event[]> {
    const core = this.kc.makeApiClient(k8s.CoreV1Api);
    const names = new Set([...this.nodes.values()].map((n) => n.name));
    const events: k8s.CoreV1Event[] = [];
    let cont: string | undefined;
    do {
      const page = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.kind=Node', limit: 500, ...(cont ? { _continue: cont } : {}) });
      events.push(...page.items.filter((e) => names.has(e.involvedObject?.name ?? '')));
      cont = page.metadata?._continue || undefined;
    } while (cont);
    return events;
  }

  /** Ready, and no NoSchedule/NoExecute taint the worker does not tolerate (the verification taint aside). */
  canRunWorker(n: k8s.V1Node): boolean {
    const ready = (n.status?.conditions ?? []).find((c) => c.type === 'Ready')?.status === 'True';
    const blocking = (n.spec?.taints ?? []).filter((t) => t.effect !== 'PreferNoSchedule' && t.key !== this.opts.taintKey && !WORKER_TOLERATES.has(t.key));
    return ready && blocking.length === 0;
  }

  private isOpen(n: k8s.V1Node): boolean {
    const tainted = (n.spec?.taints ?? []).some((t) => t.key === this.opts.taintKey);
    return !tainted || n.metadata?.labels?.[this.opts.verifiedLabel] !== undefined;
  }

  private onNode(type: string, n: k8s.V1Node): void {
    const uid = n.metadata?.uid;
    const name = n.metadata?.name;
    if (!uid || !name) return;
    const now = Date.now();
    let rec = this.nodes.get(uid);
    if (!rec) {
      const ann = n.metadata?.annotations ?? {};
      const faults: Fault[] = [];
      if (ann[FAULT.dns]) faults.push('dns');
      if (ann[FAULT.terminationMessage]) faults.push('garbage');
      if (ann[FAULT.neverStart] === 'true') faults.push('never-start');
      rec = { name, uid, faults, firstSeen: now, canRun: [], conditions: [], nodeConditions: [], progress: [], last: n };
      this.nodes.set(uid, rec);
      for (const seen of this.early.get(uid) ?? []) Monitor.applyVerification(rec, seen.nv, seen.t);
      this.early.delete(uid);
    }
    if (type === 'DELETED') {
      rec.deleted ??= now;
      this.deletions.set(uid, rec.deleted);
      return;
    }
    rec.last = n;
    if (rec.opened === undefined && this.isOpen(n)) rec.opened = now;
    const can = this.canRunWorker(n);
    if (rec.launchable === undefined && can) rec.launchable = now;
    if (rec.canRun.at(-1)?.can !== can) rec.canRun.push({ t: now, can });
    Monitor.recordCondition(rec.nodeConditions, (n.status?.conditions ?? []).find((x) => x.type === this.opts.conditionType), now);
  }

  /** A NodeVerification's progress and condition go to the record of the Node UID it was written for. */
  private onVerification(type: string, nv: NodeVerification): void {
    const uid = nv.spec?.nodeUID;
    // Deleted with its Node (garbage collection): what it said last stays on the record.
    if (!uid || type === 'DELETED') return;
    const now = Date.now();
    const rec = this.nodes.get(uid);
    if (rec) Monitor.applyVerification(rec, nv, now);
    else this.early.set(uid, [...(this.early.get(uid) ?? []), { t: now, nv }]);
  }

  private static applyVerification(rec: NodeRecord, nv: NodeVerification, t: number): void {
    const s = nv.status;
    if (!s) return;
    rec.verification = s;
    const p: ProgressSeen = { t, phase: s.phase, attempt: s.attempt, failures: s.failures };
    const lastP = rec.progress.at(-1);
    if ((p.phase ?? p.attempt ?? p.failures) !== undefined && (p.phase !== lastP?.phase || p.attempt !== lastP?.attempt || p.failures !== lastP?.failures)) rec.progress.push(p);
    Monitor.recordCondition(rec.conditions, s.conditions?.find((c) => c.type === VERIFIED_CONDITION), t);
  }

  private static recordCondition(seen: ConditionSeen[], c: { status: string; reason?: string; message?: string } | undefined, t: number): void {
    const last = seen.at(-1);
    if (c && (c.status !== last?.status || (c.reason ?? '') !== last.reason || (c.message ?? '') !== last.message)) {
      seen.push({ t, status: c.status, reason: c.reason ?? '', message: c.message ?? '' });
    }
  }

  private onPod(type: string, p: k8s.V1Pod): void {
    const uid = p.metadata?.uid;
    const node = workerNode(p);
    if (!uid || !node) return;
    const now = Date.now();
    let rec = this.pods.get(uid);
    if (!rec) {
      rec = { name: p.metadata!.name!, uid, node, nodeUid: p.metadata?.annotations?.[POD_NODE_UID] ?? '', created: now, exitedZero: false };
      this.pods.set(uid, rec);
    }
    const terminated = p.status?.containerStatuses?.[0]?.state?.terminated;
    if (terminated?.exitCode === 0) rec.exitedZero = true;
    if (finished(p) && rec.terminal === undefined) rec.terminal = now;
    if (type === 'DELETED') rec.deleted ??= now;

    // Live: exists, not being deleted, not finished. Two at once for one node name is a duplicate.
    const live = type !== 'DELETED' && isLive(p);
    let perNode = this.livePods.get(node);
    if (!perNode) this.livePods.set(node, (perNode = new Map()));
    if (live) perNode.set(uid, p);
    else perNode.delete(uid);
    if (perNode.size > 1) this.duplicates.push({ t: now, node, pods: [...perNode.values()].map((x) => x.metadata!.name!) });
  }

  /** List, then watch from the list's resourceVersion; list again whenever the watch ends. Resolves once the first watch runs. */
  private watchLoop<T extends k8s.KubernetesObject>(
    path: string,
    params: Record<string, string>,
    list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>,
    onEvent: (type: string, obj: T) => void,
    gaps: Array<[number, number | undefined]> | undefined,
  ): Promise<void> {
    const watch = new k8s.Watch(this.kc);
    return new Promise<void>((started) => {
      const loop = async (): Promise<void> => {
        let rv: string | undefined;
        while (!this.stopped) {
          try {
            if (rv === undefined) {
              const res = await list();
              const seen = new Set<string>();
              for (const item of res.items) {
                seen.add(item.metadata!.uid!);
                onEvent('ADDED', item);
              }
              // Objects gone while we were not watching.
              this.reconcileGone(path, seen);
              rv = res.metadata?.resourceVersion;
            }
            const gap = gaps?.at(-1);
            if (gap && gap[1] === undefined) gap[1] = Date.now();
            await new Promise<void>((resolve) => {
              watch
                .watch(
                  path,
                  { ...params, resourceVersion: rv, allowWatchBookmarks: true },
                  (type, obj: T & { metadata?: { resourceVersion?: string } }) => {
                    if (type === 'ERROR') {
                      rv = undefined; // 410 Gone and friends: list again
                      return;
                    }
                    if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
                    if (type !== 'BOOKMARK') onEvent(type, obj);
                  },
                  () => resolve(),
                )
                .then((abort) => {
                  this.aborts.add(abort);
                  started();
                })
                .catch((err: unknown) => {
                  this.errors.push(`watch ${path}: ${String(err)}`);
                  rv = undefined;
                  resolve();
                });
            });
          } catch (err) {
            this.errors.push(`list ${path}: ${String(err)}`);
            rv = undefined;
          }
          if (this.stopped) return;
          if (gaps && (gaps.length === 0 || gaps.at(-1)![1] !== undefined)) gaps.push([Date.now(), undefined]);
          await new Promise((r) => setTimeout(r, 200));
        }
      };
      void loop();
    });
  }

  private reconcileGone(path: string, present: Set<string>): void {
    const now = Date.now();
    // NodeVerifications gone meanwhile: nothing to record (onVerification keeps what they said last).
    if (path === NodeVerificationApi.path) return;
    if (path.endsWith('/nodes')) {
      for (const n of this.nodes.values()) {
        if (n.deleted === undefined && !present.has(n.uid)) {
          n.deleted = now;
          this.deletions.set(n.uid, now);
        }
      }
    } else {
      for (const p of this.pods.values()) {
        if (p.deleted === undefined && !present.has(p.uid)) {
          p.deleted = now;
          this.livePods.get(p.node)?.delete(p.uid);
        }
      }
    }
  }
}
