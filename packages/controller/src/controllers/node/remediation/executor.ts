import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import type { Clock } from '../../../clock.js';
import { isNotFound, statusCode } from '../../../kube/errors.js';
import { nodeName, nodeUid } from '../../../kube/objects.js';
import { KarpenterApi } from './names.js';

/**
 * The effects of remediation: find a failed node's Karpenter NodeClaim and delete it (Karpenter
 * then drains the node and terminates the instance), else delete the Node object. Every delete
 * carries a UID precondition, so a NodeClaim or Node re-created under the same name is never hit.
 *
 * Finding the NodeClaim (karpenter.sh/v1, cluster-scoped; reference error 3: never v1beta1, never
 * by node name alone when a provider ID is known):
 *   1. status.providerID == node.spec.providerID
 *   2. else status.nodeName == node name (and no contradicting providerID)
 *   3. else the node's ownerReference to a karpenter.sh NodeClaim (name and UID)
 * More than one match at a step is ambiguous: nothing is deleted.
 *
 * Without Karpenter (the API is not served: 404 on the collection) or without a matching NodeClaim
 * the Node object is deleted; the machine may keep running (reference error 5). Any other lookup
 * error (403, 5xx) is an error: never fall back to deleting the Node while a NodeClaim may exist.
 */

export interface NodeClaimRef {
  name: string;
  uid: string;
}

export interface NodeClaim {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    uid?: string;
    deletionTimestamp?: string | Date;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  status?: { providerID?: string; nodeName?: string };
}

export type MatchedBy = 'providerID' | 'nodeName' | 'ownerReference';

export type Target =
  | { kind: 'nodeclaim'; claim: NodeClaimRef; matchedBy: MatchedBy; deleting: boolean; doNotDisrupt: boolean }
  | { kind: 'node'; why: 'api-not-served' | 'no-nodeclaim' }
  | { kind: 'ambiguous'; matchedBy: MatchedBy; claims: string[] };

export type DeleteResult =
  /** The delete was accepted. */
  | 'deleted'
  /** The object was already gone. */
  | 'gone'
  /** The precondition failed: the object was replaced by another of the same name. */
  | 'changed';

/** What remediation needs from the API client (KubeClient: rate limit, retries, metrics). */
export interface RemediationKube {
  readonly kubeConfig: KubeConfig;
  read<T>(what: string, fn: () => Promise<T>): Promise<T>;
  write<T>(what: string, fn: () => Promise<T>): Promise<T>;
}

/** The executor's surface, so the remediator's unit tests can pass a recording fake. */
export interface RemediationTargets {
  getNode(name: string): Promise<V1Node | undefined>;
  /** `fresh`: bypass the short lookup cache (always, right before a delete). */
  find(node: V1Node, opts?: { fresh?: boolean }): Promise<Target>;
  deleteNodeClaim(claim: NodeClaimRef): Promise<DeleteResult>;
  deleteNode(node: V1Node): Promise<DeleteResult>;
}

export interface ExecutorOptions {
  kube: RemediationKube;
  clock: Clock;
  /** Where NodeClaims are served; tests point it at a group that does not exist. */
  api?: { group: string; version: string };
  /** How long a NodeClaim list is reused for lookups that only label Events (not for deletes). */
  cacheTtlMs?: number;
}

export class RemediationExecutor implements RemediationTargets {
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly group: string;
  private readonly version: string;
  private readonly ttl: number;
  private cached: { at: number; claims: NodeClaim[] | 'not-served' } | undefined;

  constructor(private readonly opts: ExecutorOptions) {
    this.core = opts.kube.kubeConfig.makeApiClient(CoreV1Api);
    this.custom = opts.kube.kubeConfig.makeApiClient(CustomObjectsApi);
    this.group = opts.api?.group ?? KarpenterApi.Group;
    this.version = opts.api?.version ?? KarpenterApi.Version;
    this.ttl = opts.cacheTtlMs ?? 10_000;
  }

  get apiVersion(): string {
    return `${this.group}/${this.version}`;
  }

  async getNode(name: string): Promise<V1Node | undefined> {
    try {
      return await this.opts.kube.read('get node', () => this.core.readNode({ name }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async find(node: V1Node, opts: { fresh?: boolean } = {}): Promise<Target> {
    const claims = await this.listNodeClaims(opts.fresh ?? false);
    if (claims === 'not-served') return { kind: 'node', why: 'api-not-served' };
    return matchNodeClaim(node, claims, this.group);
  }

  async deleteNodeClaim(claim: NodeClaimRef): Promise<DeleteResult> {
    this.cached = undefined;
    return this.deleting(() =>
      this.opts.kube.write('delete nodeclaim', () =>
        this.custom.deleteClusterCustomObject({
          group: this.group,
          version: this.version,
          plural: KarpenterApi.NodeClaimPlural,
          name: claim.name,
          body: { preconditions: { uid: claim.uid } },
        }),
      ),
    );
  }

  async deleteNode(node: V1Node): Promise<DeleteResult> {
    const preconditions: { uid: string; resourceVersion?: string } = { uid: nodeUid(node) };
    // The node exactly as the last decision read it: a change since (an opt-out annotation added,
    // the node verified after all) fails the delete, and the remediator decides again.
    if (node.metadata?.resourceVersion) preconditions.resourceVersion = node.metadata.resourceVersion;
    return this.deleting(() => this.opts.kube.write('delete node', () => this.core.deleteNode({ name: nodeName(node), body: { preconditions } })));
  }

  private async deleting(fn: () => Promise<unknown>): Promise<DeleteResult> {
    try {
      await fn();
      return 'deleted';
    } catch (err) {
      if (isNotFound(err)) return 'gone';
      if (statusCode(err) === 409) return 'changed';
      throw err;
    }
  }

  private async listNodeClaims(fresh: boolean): Promise<NodeClaim[] | 'not-served'> {
    const now = this.opts.clock.now();
    if (!fresh && this.cached && now - this.cached.at < this.ttl) return this.cached.claims;
    let claims: NodeClaim[] | 'not-served';
    try {
      const list = (await this.opts.kube.read('list nodeclaims', () =>
        this.custom.listClusterCustomObject({ group: this.group, version: this.version, plural: KarpenterApi.NodeClaimPlural }),
      )) as { items?: NodeClaim[] };
      claims = list.items ?? [];
    } catch (err) {
      // A collection that exists never answers 404: the group/version/resource is not served.
      if (!isNotFound(err)) throw err;
      claims = 'not-served';
    }
    this.cached = { at: now, claims };
    return claims;
  }
}

/** The matching rules above, pure (exported for table tests). */
export function matchNodeClaim(node: V1Node, claims: readonly NodeClaim[], group: string = KarpenterApi.Group): Target {
  const providerID = node.spec?.providerID ?? '';
  const name = nodeName(node);
  const found = (matches: NodeClaim[], matchedBy: MatchedBy): Target | undefined => {
    if (matches.length === 0) return undefined;
    if (matches.length > 1) return { kind: 'ambiguous', matchedBy, claims: matches.map((c) => c.metadata?.name ?? '') };
    const claim = matches[0] as NodeClaim;
    return {
      kind: 'nodeclaim',
      claim: { name: claim.metadata?.name ?? '', uid: claim.metadata?.uid ?? '' },
      matchedBy,
      deleting: Boolean(claim.metadata?.deletionTimestamp),
      doNotDisrupt: claim.metadata?.annotations?.[KarpenterApi.DoNotDisruptAnnotation] === 'true',
    };
  };

  // 1. By provider ID.
  if (providerID !== '') {
    const byProvider = found(claims.filter((c) => c.status?.providerID === providerID), 'providerID');
    if (byProvider) return byProvider;
  }
  // 2. By node name, unless the claim names another machine.
  const byName = found(
    claims.filter((c) => c.status?.nodeName === name && (!c.status?.providerID || !providerID || c.status.providerID === providerID)),
    'nodeName',
  );
  if (byName) return byName;
  // 3. By the node's owner reference.
  const owners = (node.metadata?.ownerReferences ?? []).filter((o) => o.kind === KarpenterApi.NodeClaimKind && o.apiVersion.startsWith(`${group}/`));
  const byOwner = found(
    claims.filter((c) => owners.some((o) => o.name === c.metadata?.name && o.uid === c.metadata?.uid)),
    'ownerReference',
  );
  if (byOwner) return byOwner;
  return { kind: 'node', why: 'no-nodeclaim' };
}
