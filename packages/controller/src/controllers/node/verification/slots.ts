import type { V1Pod } from '@kubernetes/client-node';
import { PodAnnotation } from '../../../api/well-known.js';
import type { Clock } from '../../../clock.js';
import { annotation, isPodTerminal } from '../../../kube/objects.js';

/**
 * Counts verifications in flight cluster-wide for reconciliation.maxConcurrentVerifications:
 * nodes with an unfinished worker pod in the cache, plus nodes whose pod was just created and is
 * not in the cache yet (reserved synchronously when a launch is decided, so concurrent reconciles
 * cannot overshoot the bound).
 */
export class VerificationSlots {
  private readonly reserved = new Map<string, number>();

  constructor(
    private readonly pods: () => readonly V1Pod[],
    private readonly clock: Pick<Clock, 'now'>,
    /** A reservation whose pod never shows up is dropped after this long. */
    private readonly reservationTtlMs = 60_000,
  ) {}

  /** Nodes with a verification in flight, not counting `except`. */
  activeExcept(except: string): number {
    return this.active(except).size;
  }

  active(except?: string): Set<string> {
    const nodes = new Set<string>();
    for (const pod of this.pods()) {
      if (isPodTerminal(pod) || pod.metadata?.deletionTimestamp) continue;
      const node = annotation(pod, PodAnnotation.NodeName);
      if (node) nodes.add(node);
    }
    const now = this.clock.now();
    for (const [node, at] of this.reserved) {
      if (nodes.has(node) || now - at > this.reservationTtlMs) this.reserved.delete(node);
      else nodes.add(node);
    }
    if (except !== undefined) nodes.delete(except);
    return nodes;
  }

  reserve(node: string): void {
    this.reserved.set(node, this.clock.now());
  }

  release(node: string): void {
    this.reserved.delete(node);
  }
}
