import type { KubernetesObject } from '@kubernetes/client-node';

/**
 * The one read-your-writes cache of the controller (client-go's MutationCache): the informer's copy
 * of an object, unless the API server has handed this controller a newer one that the watch has not
 * delivered yet (the object as our own write left it, or as a live read after a refused write found
 * it). Deciding on the informer's copy right after our own write would redo that write, so reads go
 * through this. A remembered copy is dropped as soon as the informer catches up, and on forget().
 *
 * "Newer" compares resourceVersions, which Kubernetes defines as comparable within one resource
 * type (KEP-5504, GA in 1.35: decimal integers, larger is newer). A version that is not in that
 * form is not compared: the informer's copy is used, and the write guards still catch staleness.
 *
 * `uncached` says what an object the informer does not have means: `gone` (a Node: it was deleted,
 * or no longer matches the selector; nothing of ours stands in for it) or `own` (an object this
 * controller created: our copy stands in until the watch delivers it; one of another UID replaces
 * what we knew).
 */
export class MutationCache<T extends KubernetesObject> {
  private readonly newer = new Map<string, T>();

  constructor(
    private readonly informer: { get(name: string): T | undefined },
    private readonly uncached: 'gone' | 'own',
  ) {}

  get(name: string): T | undefined {
    const cached = this.informer.get(name);
    const own = this.newer.get(name);
    if (!cached && this.uncached === 'gone') {
      this.newer.delete(name);
      return undefined;
    }
    if (own && (!cached || compareResourceVersions(own.metadata?.resourceVersion, cached.metadata?.resourceVersion) === 1)) return own;
    this.newer.delete(name);
    return cached;
  }

  /** A copy the API server returned to us (a write's response, a live read). */
  observe(obj: T): void {
    const name = obj.metadata?.name ?? '';
    const known = this.newer.get(name) ?? this.informer.get(name);
    const replaces = this.uncached === 'own' && (known === undefined || known.metadata?.uid !== obj.metadata?.uid);
    if (replaces || compareResourceVersions(obj.metadata?.resourceVersion, known?.metadata?.resourceVersion) === 1) this.newer.set(name, obj);
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
