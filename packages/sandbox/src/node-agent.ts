import type { Logger } from '@kube-node-ready/core';
import { bringUpPlan } from './bring-up.js';
import { KUBELET_PORT } from './kubelet/server.js';
import { k8s, statusCode } from './kube.js';
import { FAULT, kubeletNodeStatus, NOT_READY_CONDITION, READY_CONDITION } from './node-registry.js';

/** A real kubelet renews its Lease every 10 s (a quarter of the 40 s lease duration). */
export const DEFAULT_LEASE_RENEW_MS = 10_000;

interface NodeEntry {
  node: k8s.V1Node;
  ip: string;
  leaseVersion?: string;
  timers: NodeJS.Timeout[];
  registered: boolean;
}

/**
 * The node side of the simulated kubelet, for every simulated node: registers the kubelet's view of
 * the node (a realistic status: addresses, the kubelet API endpoint, images, conditions), keeps the
 * node's Lease renewed (so kube-controller-manager's node lifecycle controller sees it alive), plays
 * the node's bring-up (NotReady for a while after registration, other agents' startup taints
 * removed later) and honours the `not-ready` fault. The `node.kubernetes.io/not-ready` and
 * `unreachable` taints are kube-controller-manager's, not ours.
 */
export class NodeAgent {
  private readonly entries = new Map<string, NodeEntry>();
  private readonly usedIps = new Set<string>();
  private nextIp = 1;
  private leaseTimer?: NodeJS.Timeout;
  private readonly core: k8s.CoreV1Api;
  private readonly coord: k8s.CoordinationV1Api;
  private stopped = false;
  private renewing = false;
  /** Nodes whose Lease is not renewed (fault: the kubelet stopped). */
  private readonly silenced = new Set<string>();

  constructor(
    kc: k8s.KubeConfig,
    private readonly log: Logger,
    private readonly leaseRenewMs = DEFAULT_LEASE_RENEW_MS,
  ) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.coord = kc.makeApiClient(k8s.CoordinationV1Api);
  }

  start(): void {
    this.leaseTimer = setInterval(() => void this.renewLeases(), this.leaseRenewMs);
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.leaseTimer);
    for (const e of this.entries.values()) for (const t of e.timers) clearTimeout(t);
  }

  /** The InternalIP of a node this agent plays (the kubelet API listens there). */
  nodeIp(name: string): string | undefined {
    return this.entries.get(name)?.ip;
  }

  onNode(type: 'ADDED' | 'MODIFIED' | 'DELETED', node: k8s.V1Node): void {
    const name = node.metadata?.name;
    if (!name) return;
    const known = this.entries.get(name);
    if (type === 'DELETED' || (known && known.node.metadata?.uid !== node.metadata?.uid)) {
      if (known) this.forget(name, known);
      if (type === 'DELETED') return;
    }
    let entry = this.entries.get(name);
    if (!entry) {
      entry = { node, ip: this.ipFor(node), timers: [], registered: false };
      this.entries.set(name, entry);
      this.schedule(entry);
      void this.renewLease(entry);
    }
    entry.node = node;
    void this.syncStatus(entry);
    void this.removeDueTaints(entry);
  }

  private forget(name: string, entry: NodeEntry): void {
    for (const t of entry.timers) clearTimeout(t);
    this.usedIps.delete(entry.ip);
    this.entries.delete(name);
    this.silenced.delete(name);
  }

  /** Keeps an address the node already reports (a restarted sandbox), else the next free one in 10.1.0.0/16. */
  private ipFor(node: k8s.V1Node): string {
    const existing = node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address;
    if (existing && !this.usedIps.has(existing)) {
      this.usedIps.add(existing);
      return existing;
    }
    for (;;) {
      const n = this.nextIp++;
      const ip = `10.1.${(n >> 8) & 255}.${n & 255}`;
      if ((n & 255) === 0 || this.usedIps.has(ip)) continue;
      this.usedIps.add(ip);
      return ip;
    }
  }

  /** Timers for the moments the node's bring-up changes something (Ready, a taint removed). */
  private schedule(entry: NodeEntry): void {
    const plan = bringUpPlan(entry.node);
    if (plan.invalid) this.log.warn({ node: entry.node.metadata?.name, invalid: plan.invalid }, 'bring-up annotations that cannot be read are ignored');
    const at = (when: number, fn: () => void) => {
      const t = setTimeout(fn, Math.max(0, when - Date.now()) + 50);
      t.unref();
      entry.timers.push(t);
    };
    if (plan.readyAt && plan.readyAt > Date.now()) at(plan.readyAt, () => void this.syncStatus(entry));
    for (const r of plan.taintRemovals ?? []) at(r.at, () => void this.removeDueTaints(entry));
  }

  private wantReady(node: k8s.V1Node): boolean {
    if (node.metadata?.annotations?.[FAULT.notReady] === 'true') return false;
    return (bringUpPlan(node).readyAt ?? 0) <= Date.now();
  }

  /**
   * Posts the kubelet's node status: the whole status once at registration (as a kubelet does),
   * then the Ready condition whenever it should change. Strategic merge patches under the field
   * manager `kubelet`, so managedFields look like a real node's.
   */
  private async syncStatus(entry: NodeEntry, heartbeat = false): Promise<void> {
    const node = entry.node;
    const name = node.metadata!.name!;
    // A stopped kubelet posts nothing: kube-controller-manager's Unknown stands until it returns.
    if (this.stopped || this.silenced.has(name)) return;
    const wantReady = this.wantReady(node);
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
    const registered = entry.registered || node.status?.daemonEndpoints?.kubeletEndpoint?.Port === KUBELET_PORT;
    if (registered && !heartbeat && ready && (ready.status === 'True') === wantReady) return;
    const now = new Date();
    const status = registered
      ? { conditions: [{ ...(wantReady ? READY_CONDITION : NOT_READY_CONDITION), lastHeartbeatTime: now, lastTransitionTime: now }] }
      : kubeletNodeStatus(node, entry.ip, KUBELET_PORT, wantReady, now);
    try {
      await this.core.patchNodeStatus({ name, body: { status }, fieldManager: 'kubelet' }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
      entry.registered = true;
    } catch (err) {
      if (statusCode(err) !== 404) this.log.debug({ err: String(err), node: name }, 'node status update failed; the next event retries');
    }
  }

  /** Removes the taints whose removal time has come (another agent's job on a real node). */
  private async removeDueTaints(entry: NodeEntry): Promise<void> {
    if (this.stopped) return;
    const due = new Set((bringUpPlan(entry.node).taintRemovals ?? []).filter((r) => r.at <= Date.now()).map((r) => r.key));
    const taints = entry.node.spec?.taints ?? [];
    const idx = taints.findIndex((t) => due.has(t.key));
    if (idx < 0) return;
    const name = entry.node.metadata!.name!;
    try {
      await this.core.patchNode(
        { name, body: [{ op: 'test', path: `/spec/taints/${idx}`, value: taints[idx] }, { op: 'remove', path: `/spec/taints/${idx}` }], fieldManager: 'sandbox-agent' },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
      );
      this.log.info({ node: name, taint: taints[idx]!.key }, 'bring-up: agent removed its startup taint');
    } catch (err) {
      // A conflict means the node changed: its watch event brings the new copy and another try.
      if (statusCode(err) !== 404) this.log.debug({ err: String(err), node: name }, 'taint removal conflicted; the next event retries');
    }
  }

  /** Fault: the node's kubelet stops (no Lease renewals) or comes back. */
  setKubeletStopped(name: string, stopped: boolean): void {
    if (stopped) this.silenced.add(name);
    else this.silenced.delete(name);
    const entry = this.entries.get(name);
    if (!stopped && entry) void this.renewLease(entry).then(() => this.syncStatus(entry, true));
  }

  /**
   * One round of renewals, 16 at a time (thousands of nodes fit in one period); a round still
   * running when the next period starts is not doubled.
   */
  private async renewLeases(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      const queue = [...this.entries.values()];
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let e = queue.shift(); e && !this.stopped; e = queue.shift()) await this.renewLease(e);
        }),
      );
    } finally {
      this.renewing = false;
    }
  }

  /**
   * Renews the node's Lease in kube-node-lease. An update must carry the resourceVersion it
   * replaces: the one from our last write, or a fresh read after a conflict.
   */
  private async renewLease(entry: NodeEntry, attempt = 0): Promise<void> {
    const node = entry.node;
    const name = node.metadata!.name!;
    if (this.stopped || this.silenced.has(name) || this.entries.get(name) !== entry) return;
    const body: k8s.V1Lease = {
      metadata: {
        name,
        namespace: 'kube-node-lease',
        resourceVersion: entry.leaseVersion,
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata!.uid! }],
      },
      spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: new k8s.V1MicroTime() },
    };
    try {
      const lease = entry.leaseVersion
        ? await this.coord.replaceNamespacedLease({ name, namespace: 'kube-node-lease', body })
        : await this.coord.createNamespacedLease({ namespace: 'kube-node-lease', body });
      entry.leaseVersion = lease.metadata?.resourceVersion;
    } catch (err) {
      const code = statusCode(err);
      if ((code === 409 || code === 404) && attempt < 2) {
        // 409: someone else's copy (or a create of an existing Lease); 404: it was deleted (a node
        // re-created under the same name). Read what is there, then write on top of it.
        entry.leaseVersion = await this.coord
          .readNamespacedLease({ name, namespace: 'kube-node-lease' })
          .then((l) => l.metadata?.resourceVersion)
          .catch(() => undefined);
        return this.renewLease(entry, attempt + 1);
      }
      this.log.warn({ err: String(err), node: name }, 'node lease renewal failed; kube-controller-manager marks the node Unknown if this persists');
    }
  }
}
