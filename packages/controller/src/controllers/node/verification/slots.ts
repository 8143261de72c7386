import type { V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../../../clock.js';
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

  constructor(
    private readonly pods: () => readonly V1Pod[],
    private readonly clock: Pick<Clock, 'now'>,
    private readonly opts: {
      /** A reservation whose pod never shows up is dropped after this long. */
      reservationTtlMs: number;
      /** A waiting node not seen again for this long leaves the queue. */
      waitingTtlMs: number;
    } = { reservationTtlMs: 60_000, waitingTtlMs: 60_000 },
  ) {}

  /** Nodes with a verification in flight, not counting `except`. */
  activeExcept(except: string): number {
    return this.active(except).size;
  }

  active(except?: string): Set<string> {
    const nodes = new Set<string>();
    for (const pod of this.pods()) {
      if (isPodTerminal(pod) || pod.metadata?.deletionTimestamp) continue;
      const node = workerNodeName(pod);
      if (node) nodes.add(node);
    }
    const now = this.clock.now();
    for (const [node, at] of this.reserved) {
      if (nodes.has(node) || now - at > this.opts.reservationTtlMs) this.reserved.delete(node);
      else nodes.add(node);
    }
    if (except !== undefined) nodes.delete(except);
    return nodes;
  }

  /**
   * Slots `node` cannot have now: verifications in flight (not its own) plus the nodes waiting
   * ahead of it. It may launch while this is below the bound.
   */
  taken(node: string, arrival: number): number {
    return this.activeExcept(node) + this.ahead(node, arrival);
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

  private prune(): void {
    const now = this.clock.now();
    for (const [node, w] of this.line) if (now - w.seen > this.opts.waitingTtlMs) this.leaveQueue(node);
  }
}

function before(arrivalA: number, a: string, arrivalB: number, b: string): boolean {
  return arrivalA !== arrivalB ? arrivalA < arrivalB : a < b;
}
