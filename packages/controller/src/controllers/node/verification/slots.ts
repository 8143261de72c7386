import type { V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../../../clock.js';
import type { InformerHandlers } from '../../../kube/informer.js';
import { isPodTerminal } from '../../../kube/objects.js';
import { workerNodeName } from './pod-spec.js';

/**
 * The verification slots of reconciliation.maxConcurrentVerifications, and the queue of nodes
 * waiting for one.
 *
 * In flight: nodes with an unfinished worker pod in the cache, plus nodes whose pod was just
 * created and is not in the cache yet (reserved synchronously when a launch is decided, so
 * concurrent reconciles cannot overshoot the bound).
 *
 * Waiting: nodes that could run their worker now but found every slot taken. They are served in
 * order of arrival (node creation time, then name): a node may take a free slot only when fewer
 * nodes wait ahead of it than slots are free, and freed slots wake as many nodes, first in line
 * first. A waiting node also looks again now and then (CONCURRENCY_RECHECK_MS), which keeps its
 * entry; an entry not kept for `waitingTtlMs` (the node went away unseen) stops holding up the
 * nodes behind it.
 *
 * The time each node has spent waiting is kept until the node is forgotten: waiting one's turn is
 * never the node's fault, so remediation's stuck-node clock does not count it (queuedMs()).
 */
export class VerificationSlots {
  private readonly reserved = new Map<string, number>();
  private readonly line = new Map<string, { arrival: number; since: number; seen: number }>();
  /** Milliseconds spent waiting in earlier turns, per node. */
  private readonly waited = new Map<string, number>();
  /** Unfinished worker pods in the cache (namespace/name -> the node each verifies). */
  private readonly livePods = new Map<string, string>();
  /** Nodes with an unfinished worker pod in the cache, and how many they have. */
  private readonly inFlight = new Map<string, number>();

  /**
   * `pods`: the worker pod cache. What is in flight is kept from its events as they come (a relist's
   * included), so counting it costs the same with 10 or 10,000 pods: it is counted by every
   * reconcile and every freed slot, and a scan of every pod each time would grow with the square of
   * a burst.
   */
  constructor(
    pods: WorkerPodSource,
    private readonly clock: Pick<Clock, 'now'>,
    private readonly opts: {
      /** A reservation whose pod never shows up is dropped after this long. */
      reservationTtlMs: number;
      /** A waiting node not seen again for this long leaves the queue. */
      waitingTtlMs: number;
    } = { reservationTtlMs: 60_000, waitingTtlMs: 60_000 },
  ) {
    for (const pod of pods.list()) this.observe(pod);
    pods.on({ add: (pod) => this.observe(pod), update: (pod) => this.observe(pod), delete: (pod) => this.drop(podId(pod)) });
  }

  /** How many nodes have a verification in flight (not counting `except`). */
  activeCount(except?: string): number {
    this.pruneReservations();
    const n = this.inFlight.size + this.reserved.size;
    return except !== undefined && (this.inFlight.has(except) || this.reserved.has(except)) ? n - 1 : n;
  }

  /** The nodes with a verification in flight. */
  active(): Set<string> {
    this.pruneReservations();
    return new Set([...this.inFlight.keys(), ...this.reserved.keys()]);
  }

  /**
   * Slots `node` cannot have now: verifications in flight (not its own) plus the nodes waiting
   * ahead of it. It may launch while this is below the bound.
   */
  taken(node: string, arrival: number): number {
    return this.activeCount(node) + this.ahead(node, arrival);
  }

  /** Nodes waiting that arrived before `node` (arrival, then name). */
  private ahead(node: string, arrival: number): number {
    this.prune();
    let n = 0;
    for (const [other, w] of this.line) if (other !== node && before(w.arrival, other, arrival, node)) n++;
    return n;
  }

  /** `node` found no free slot: it joins the queue (or keeps its place). */
  wait(node: string, arrival: number): void {
    const now = this.clock.now();
    const w = this.line.get(node);
    if (w) {
      w.seen = now;
      w.arrival = arrival;
    } else this.line.set(node, { arrival, since: now, seen: now });
  }

  /** `node` launches: it holds a slot from now until its pod is in the cache (or the TTL). */
  reserve(node: string): void {
    this.leaveQueue(node);
    this.reserved.set(node, this.clock.now());
  }

  release(node: string): void {
    this.reserved.delete(node);
  }

  /** `node` no longer waits for a slot (it launched, or needs none now); its time waited is kept. */
  leaveQueue(node: string): void {
    const w = this.line.get(node);
    if (!w) return;
    this.line.delete(node);
    this.waited.set(node, (this.waited.get(node) ?? 0) + Math.max(0, this.clock.now() - w.since));
  }

  /** The node is gone: everything about it goes. */
  forget(node: string): void {
    this.reserved.delete(node);
    this.line.delete(node);
    this.waited.delete(node);
  }

  /** Whether `node` is waiting for a slot now. */
  waiting(node: string): boolean {
    this.prune();
    return this.line.has(node);
  }

  /** How long `node` has waited for a slot in all, its current wait included. */
  queuedMs(node: string): number {
    const w = this.line.get(node);
    return (this.waited.get(node) ?? 0) + (w ? Math.max(0, this.clock.now() - w.since) : 0);
  }

  /** The first `n` waiting nodes in order of arrival (woken when slots free). */
  first(n = 1): string[] {
    this.prune();
    return [...this.line]
      .sort(([a, wa], [b, wb]) => (before(wa.arrival, a, wb.arrival, b) ? -1 : 1))
      .slice(0, n)
      .map(([node]) => node);
  }

  /** A worker pod as the cache has it now: in flight until it finishes or is being deleted. */
  private observe(pod: V1Pod): void {
    const id = podId(pod);
    const node = isPodTerminal(pod) || pod.metadata?.deletionTimestamp ? undefined : workerNodeName(pod);
    if (this.livePods.get(id) === node) return;
    this.drop(id);
    if (node === undefined) return;
    this.livePods.set(id, node);
    this.inFlight.set(node, (this.inFlight.get(node) ?? 0) + 1);
    // Its pod is in the cache: the reservation has served.
    this.reserved.delete(node);
  }

  private drop(id: string): void {
    const node = this.livePods.get(id);
    if (node === undefined) return;
    this.livePods.delete(id);
    const left = (this.inFlight.get(node) ?? 1) - 1;
    if (left > 0) this.inFlight.set(node, left);
    else this.inFlight.delete(node);
  }

  /** Reservations whose pod is in the cache, or that never saw it within reservationTtlMs, end. */
  private pruneReservations(): void {
    const now = this.clock.now();
    for (const [node, at] of this.reserved) if (this.inFlight.has(node) || now - at > this.opts.reservationTtlMs) this.reserved.delete(node);
  }

  private prune(): void {
    const now = this.clock.now();
    for (const [node, w] of this.line) if (now - w.seen > this.opts.waitingTtlMs) this.leaveQueue(node);
  }
}

/** The worker pod cache, as VerificationSlots reads it (the pod informer). */
export interface WorkerPodSource {
  list(): readonly V1Pod[];
  on(handlers: InformerHandlers<V1Pod>): void;
}

function podId(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

function before(arrivalA: number, a: string, arrivalB: number, b: string): boolean {
  return arrivalA !== arrivalB ? arrivalA < arrivalB : a < b;
}
