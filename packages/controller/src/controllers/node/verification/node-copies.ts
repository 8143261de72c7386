import type { V1Node } from '@kubernetes/client-node';
import { nodeName } from '../../../kube/objects.js';

/**
 * The newest copy of each node the controller has: the informer's, unless the API server has
 * handed this controller a newer one that the watch has not delivered yet (the node as our own
 * write left it, or as a live read after a refused write found it). Deciding on the informer's
 * copy right after our own write would redo that write (or, for a copy without our progress,
 * start over), so reconciles read through this instead. client-go's MutationCache, for nodes.
 *
 * "Newer" compares resourceVersions, which Kubernetes defines as comparable within one resource
 * type (KEP-5504, GA in 1.35: decimal integers, larger is newer). A version that is not in that
 * form is not compared: the informer's copy is used, and the write guard still catches staleness.
 * A remembered copy is dropped as soon as the informer catches up, and when the node is gone.
 */
export class NodeCopies {
  private readonly newer = new Map<string, V1Node>();

  constructor(private readonly informer: { get(name: string): V1Node | undefined }) {}

  get(name: string): V1Node | undefined {
    const cached = this.informer.get(name);
    const own = this.newer.get(name);
    if (!cached) {
      this.newer.delete(name);
      return undefined;
    }
    if (own && compareResourceVersions(own.metadata?.resourceVersion, cached.metadata?.resourceVersion) === 1) return own;
    this.newer.delete(name);
    return cached;
  }

  /** A copy the API server returned to us (a write's response, a live read). */
  observe(node: V1Node): void {
    const name = nodeName(node);
    const known = this.newer.get(name) ?? this.informer.get(name);
    if (compareResourceVersions(node.metadata?.resourceVersion, known?.metadata?.resourceVersion) === 1) this.newer.set(name, node);
  }

  forget(name: string): void {
    this.newer.delete(name);
  }
}

const WELL_FORMED = /^[1-9][0-9]*$/;

/**
 * -1, 0 or 1 as resourceVersion a is older than, the same as, or newer than b (KEP-5504; client-go
 * CompareResourceVersion). Undefined when either is missing or not a well-formed version.
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  if (a === undefined || b === undefined || !WELL_FORMED.test(a) || !WELL_FORMED.test(b)) return undefined;
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}
